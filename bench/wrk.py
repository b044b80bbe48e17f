"""One wrk run with a script from wrk_scripts/."""
import functools
import json
import os
import subprocess
import urllib.request

from runtime.settings import ROOT
from .stats import WrkOutputError, parse_wrk

SCRIPTS = os.path.join(ROOT, 'wrk_scripts')
PATHS = {'ugly': '/ugly', 'about': '/about', 'good': '/good', 'bad': '/bad',
         'pack': '/packs/{pack}', 'sticker': '/packs/{pack}/{sticker}',
         'index': '/', 'vote': '/'}
PAGES = tuple(PATHS)
# Voting needs each answer before the next request: no pipelined variant.
PLAIN_ONLY = ('vote',)


def path(url, page):
    """The path a page is timed at: a pack's and a sticker's are those of
    the first pack and its first sticker, as the site's JSON API lists them."""
    return PATHS[page].format(**sample(url)) if '{' in PATHS[page] else PATHS[page]


@functools.lru_cache(maxsize=64)
def sample(url):
    with urllib.request.urlopen(url + '/stickers', timeout=30) as r:
        pack = json.load(r)[0]['name']
    with urllib.request.urlopen('%s/stickers/%s' % (url, pack), timeout=30) as r:
        first = min(s['id'] for s in json.load(r)['stickers'])
    return {'pack': pack, 'sticker': first}


def script(page, mode):
    if page == 'vote':
        return os.path.join(SCRIPTS, 'vote.lua')
    if mode == 'pipelined':
        return os.path.join(SCRIPTS, 'pipeline_%s.lua' % page)
    return os.path.join(SCRIPTS, 'get.lua')


def command(url, page, mode, connections, duration, threads, timeout,
            pipeline, pin=()):
    """(argv, extra environment) of one run."""
    argv = list(pin) + [
        'wrk', '-c%d' % connections, '-d%ds' % duration, '-t%d' % threads,
        '--timeout', '%ds' % timeout, '-s', script(page, mode), url]
    env = {'WRK_PATH': path(url, page)}
    if mode == 'pipelined':
        env['WRK_PIPELINE'] = str(pipeline)
    return argv, env


def run(argv, env, duration):
    """Run wrk; the raw record kept in results.json."""
    record = {'command': argv, 'env': env}
    try:
        done = subprocess.run(argv, env=dict(os.environ, **env), cwd=ROOT,
                              capture_output=True, text=True,
                              timeout=duration + 60)
    except subprocess.TimeoutExpired:
        record.update(exit_code=None, wrk=None, error='wrk did not finish')
        return record
    except OSError as e:
        record.update(exit_code=None, wrk=None, error='cannot run wrk: %s' % e)
        return record
    record['exit_code'] = done.returncode
    if done.stderr.strip():
        record['stderr'] = done.stderr.strip()[-2000:]
    try:
        record['wrk'] = parse_wrk(done.stdout)
    except WrkOutputError as e:
        record.update(wrk=None, error='%s; stderr: %s' % (e, done.stderr.strip()[-500:]))
    return record
