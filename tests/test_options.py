"""The options server.py, bench.py and the soak, crash and flood commands
share (runtime/options.py): the same bad value is refused by each, exit 2,
with the same message."""
import subprocess
import sys

import pytest

from conftest import ROOT
from bench import cli

# Each test starts what it needs itself.
pytestmark = pytest.mark.server

ENGINE = 'aiohttp-tarantool-one'
# Each stops right after its options, should a bad value pass: --list, or
# an unknown engine (refused with another message).
COMMANDS = {
    'server.py': ['server.py', '-e', ENGINE, '--list'],
    'bench.py': ['bench.py', '--engines', ENGINE, '--list'],
    'bench.soak': ['-m', 'bench.soak', '--engine', 'none'],
    'bench.floods': ['-m', 'bench.floods', '--engine', 'none'],
    'bench.crashes': ['-m', 'bench.crashes', '--engine', 'none'],
}
BAD = [
    (['--packs', '1'], 'argument --packs: must be 2..5000, not 1'),
    (['--packs', '5001'], 'argument --packs: must be 2..5000, not 5001'),
    (['--packs', 'many'], "argument --packs: 'many' is not a whole number"),
    (['--workers', '0'], 'argument --workers: must be 1..256, not 0'),
    (['--workers', '257'], 'argument --workers: must be 1..256, not 257'),
    (['--replicas', '9'], 'argument --replicas: must be 0..8, not 9'),
    (['--replicas', '-1'], 'argument --replicas: must be 0..8, not -1'),
    (['--delay', '-1'], 'argument --delay: must be 0..10000 ms, not -1'),
    (['--delay', '10001'], 'argument --delay: must be 0..10000 ms, not 10001'),
    (['--delay', 'nan'], 'argument --delay: must be 0..10000 ms, not nan'),
    (['--tarantool', 'nohost'], 'argument --tarantool: Tarantool address '
     "must be HOST:PORT, not 'nohost'"),
    (['--postgres', 'postgresql://h:99999/db'], 'argument --postgres:'),
    (['--redis', 'http://127.0.0.1:6379'], 'argument --redis:'),
]


def refused(command, argv):
    done = subprocess.run([sys.executable] + COMMANDS[command] + argv,
                          cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    return done.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize('argv, message', BAD)
def test_server_and_bench_refuse_the_same_values_alike(argv, message):
    said = {command: refused(command, argv)
            for command in ('server.py', 'bench.py')}
    assert said['server.py'].startswith('server.py: error: ' + message)
    assert said['bench.py'] == said['server.py'].replace('server.py',
                                                         'bench.py', 1)


@pytest.mark.parametrize('command', ['bench.soak', 'bench.floods',
                                     'bench.crashes'])
def test_the_soak_crash_and_flood_commands_check_packs_alike(command):
    assert refused(command, ['--packs', '1']) == \
        '%s: error: argument --packs: must be 2..5000, not 1' % command


def test_bench_passes_what_server_py_accepts():
    """A fractional --delay and the edges of each range reach server.py."""
    plan = cli.plan(['--engines', ENGINE, '--delay', '0.5', '--packs', '5000',
                     '--redis-fsync', 'everysec', '--out', '/nonexistent'])
    assert plan.server_args == ['--packs', '5000', '--delay', '0.5',
                                '--redis-fsync', 'everysec']


ROBYN = 'robyn-tarantool-one-uvloop'


def test_server_refuses_robyn_beyond_the_loopback_without_a_front():
    """Robyn holds slow and idle clients and whole bodies without limit
    (docs/robyn.md): beyond the loopback only behind a named front."""
    said = refused('server.py', ['-e', ROBYN, '--host', '0.0.0.0'])
    assert said == (
        'server.py: error: --host 0.0.0.0: Robyn engines have no client '
        'timeouts, connection cap or body limit before reading '
        '(docs/robyn.md); serve them on the loopback, or behind a front '
        'server that holds those limits, named with --proxy ADDR '
        '(docs/deploy.md)')


@pytest.mark.parametrize('argv', [
    ['--host', '127.0.0.1'], ['--host', 'localhost'], ['--host', '::1'],
    ['--host', '0.0.0.0', '--proxy', '127.0.0.1'],
    ['-e', 'aiohttp-tarantool-one', '--host', '0.0.0.0']])
def test_server_takes_robyn_on_the_loopback_or_behind_a_front(argv):
    import server
    args = server.parse_args(['-e', ROBYN] + argv)
    assert args.host == argv[argv.index('--host') + 1]
