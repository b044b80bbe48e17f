"""Lanes: each test is marked by what it starts, from the fixtures it
requests or its module's own mark, so that `-m unit` (nothing started) and
`-m fast` (that, plus the contract suite on the session's memtx Tarantool
and Redis) run alone.  A unit test that starts a process or reaches past
the loopback fails."""
import importlib.util
import ipaddress
import socket
import subprocess

import pytest

# Lane -> the fixtures (by name) that put a test in it; a test that starts
# things itself carries its module's mark instead (pytestmark). A server
# always runs on a database (the session's, through engine_args).
FIXTURES = {
    'db': {'tarantool', 'tarantool_vinyl', 'postgres', 'postgres_orm', 'redis',
           'rediscluster',
           'backend', 'relayed_backend',
           'app_connection', 'cluster', 'primary', 'standby',
           'start_server', 'shared_server'},
    'server': {'start_server', 'shared_server', 'front'},
    'bench': {'quick_run', 'profile_run', 'limits_run', 'latency_runs',
              'target_run', 'two_pythons', 'bare_environment'},
    'browser': {'browser'},
}
STARTS = ('db', 'server', 'bench', 'browser')
# The contract tests in the fast lane: those on the session's memtx
# Tarantool and Redis, which start in well under a second (PostgreSQL's
# initdb takes seconds, and vinyl's run would add as many tests again: both
# are in the full run), but for those that start an instance of their own
# (own_database).
FAST_BACKENDS = {'tarantool-one', 'tarantool-multi', 'redis-one', 'redis-pool',
                 'aiotarantool-one', 'aiotarantool-multi'}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    # needs(MODULE): run where it installs (japronto and aiotarantool in
    # .venv37, the legacy lane; psycopg's pool in the main one)
    gone = [i for i in items if any(
        not importlib.util.find_spec(m.args[0]) for m in i.iter_markers('needs'))]
    if gone:
        config.hook.pytest_deselected(items=gone)
        items[:] = [i for i in items if i not in gone]
    for item in items:
        names = set(item.fixturenames)
        for lane in STARTS:
            if names & FIXTURES[lane]:
                item.add_marker(lane)
        marked = {m.name for m in item.iter_markers()}
        if not marked & set(STARTS):
            item.add_marker('unit')
            item.add_marker('fast')
        elif 'backend' in names and item.module.__name__ == 'test_contract':
            item.add_marker('contract')
            if (item.callspec.params['backend'] in FAST_BACKENDS
                    and not item.get_closest_marker('own_database')):
                item.add_marker('fast')


class StartedSomething(Exception):
    pass


def _refuse_process(*args, **kwargs):
    raise StartedSomething(
        'a unit test started a process (%r): mark its module with what it '
        'starts (pytestmark = pytest.mark.server, db, bench or browser)'
        % (args[1] if len(args) > 1 else kwargs.get('args'),))


def _loopback(address):
    if not isinstance(address, tuple):
        return True                     # a Unix socket
    host = address[0]
    if host == 'localhost':
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _guarded(connect):
    def guarded(sock, address):
        if not _loopback(address):
            raise StartedSomething('a unit test reached %r, off the loopback'
                                   % (address,))
        return connect(sock, address)
    return guarded


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    with _unit_guard(item):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    with _unit_guard(item):
        yield


class _unit_guard:
    """While a unit test sets up and runs: no subprocess, no connection
    off the loopback (session fixtures end in teardown, unguarded)."""

    def __init__(self, item):
        self.on = item.get_closest_marker('unit') is not None

    def __enter__(self):
        if self.on:
            self.saved = (subprocess.Popen.__init__, socket.socket.connect,
                          socket.socket.connect_ex)
            subprocess.Popen.__init__ = _refuse_process
            socket.socket.connect = _guarded(self.saved[1])
            socket.socket.connect_ex = _guarded(self.saved[2])

    def __exit__(self, *exc):
        if self.on:
            (subprocess.Popen.__init__, socket.socket.connect,
             socket.socket.connect_ex) = self.saved
