"""One wrk run with a script from wrk_scripts/."""
import os
import subprocess

from runtime.settings import ROOT
from .stats import WrkOutputError, parse_wrk

SCRIPTS = os.path.join(ROOT, 'wrk_scripts')
PATHS = {'ugly': '/ugly', 'about': '/about', 'good': '/good', 'bad': '/bad',
         'index': '/', 'vote': '/'}
PAGES = tuple(PATHS)
# Voting needs each answer before the next request: no pipelined variant.
PLAIN_ONLY = ('vote',)


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
    env = {'WRK_PATH': PATHS[page]}
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
