"""./run.sh new-site DIR --engine ENGINE: a new project for one engine of
this one, that serves, tests and deploys on its own (docs/new-site.md)."""
import argparse
import difflib
import os
import sys

from runtime import engines, frameworks
from runtime.databases import table

from .modules import ROOT


def check_engine(name):
    """The engine called `name`; SystemExit(2) with why not."""
    engine = engines.BY_NAME.get(name)
    if engine is None:
        close = difflib.get_close_matches(name, engines.BY_NAME, n=1,
                                          cutoff=0.0)
        fail('unknown engine %r; did you mean %r? (python server.py --list '
             'lists them)' % (name, close[0] if close else None))
    if not (frameworks.BY_NAME[engine.framework].current
            and table.DRIVER[engine.driver].current):
        fail('%s runs only on CPython 3.7, which no longer gets security '
             'fixes: a new site is made for an engine of the current '
             'interpreter (e.g. %s)' % (name, engines.closest(
                 name.replace('japronto', 'aiohttp').replace(
                     'aiotarantool', 'tarantool'))))
    if table.DRIVER[engine.driver].name == 'rediscluster':
        fail('%s is not made into a new site yet: its cluster data layer '
             'shares one Redis\'s module and functions, which a one-database '
             'site leaves out; take a Redis engine (e.g. %s) and see '
             'docs/databases.md for the cluster' % (
                 name, engines.closest(name.replace('rediscluster-pool',
                                                    'redis-pool'))))
    return engine


def check_directory(path, called_from):
    """The site's directory: `path`, from `called_from` if relative;
    SystemExit(2) with why not. Not in this checkout (copying it into
    itself never ends), not a dangling link, and missing or empty."""
    path = os.path.abspath(os.path.join(called_from, path))
    real, root = os.path.realpath(path), os.path.realpath(ROOT)
    if real == root or real.startswith(root + os.sep):
        fail('%s is %s checkout (%s): give a directory outside it' % (
            path, 'this' if real == root else 'inside this', root))
    if os.path.islink(path) and not os.path.exists(path):
        fail('%s is a symbolic link to %s, which does not exist: give a '
             'new or empty directory' % (path, os.readlink(path)))
    if os.path.exists(path) and (not os.path.isdir(path) or os.listdir(path)):
        fail('%s exists and is not an empty directory: give a new one'
             % path)
    return path


def fail(message):
    print('new-site: ' + message, file=sys.stderr)
    sys.exit(2)


def main(argv=None):
    p = argparse.ArgumentParser(
        prog='./run.sh new-site',
        description='Write a new project that serves one engine of this '
                    'one, with its own run.sh, tests and deploy recipe.')
    p.add_argument('directory', metavar='DIR', help='a new or empty '
                   'directory outside this checkout')
    # run.sh's: where it was called from (it runs this from the checkout).
    p.add_argument('--called-from', default=os.getcwd(),
                   help=argparse.SUPPRESS)
    p.add_argument('--engine', required=True, help='e.g. '
                   'aiohttp-tarantool-one-uvloop (server.py --list)')
    args = p.parse_args(argv)
    engine = check_engine(args.engine)
    directory = check_directory(args.directory, args.called_from)
    from .build import build
    build(engine, directory)
    print('wrote the %s site to %s: cd there, then ./run.sh test and '
          './run.sh serve' % (engine.name, directory))
    return 0
