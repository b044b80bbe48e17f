"""server.py as a child process on a free port: ServerProcess, the
start_server and shared_server fixtures, and a client's fetch()."""
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from runtime import engines, frameworks
from runtime.processes import answers, free_port, terminate
from runtime.settings import ROOT
from plugins.databases import TEST_PACKS, tarantool_address
from plugins.waiting import wait_until


def one_of_each(named, kind='tarantool-one-uvloop'):
    """The engines `named` that the table has, and one engine of every
    framework of the table they name none of (FRAMEWORK-kind where there is
    one): a framework added to the table gets the page, hostile, edge and
    signal tests with no edit here."""
    named = [name for name in named if name in engines.BY_NAME]
    have = {name.split('-')[0] for name in named}
    for f in frameworks.TABLE:
        if f.name not in have:
            its = [e.name for e in engines.ENGINES if e.framework == f.name]
            wanted = '%s-%s' % (f.name, kind)
            named.append(wanted if wanted in its else its[0])
    return named


def skip_unless_runnable(engine):
    """Skip the test when server.py cannot run the engine, here or through
    the legacy environment."""
    status = engines.runs_here(engines.BY_NAME[engine])
    if status.startswith('no: '):
        pytest.skip('%s: %s' % (engine, status[len('no: '):]))


class ServerProcess:
    """python server.py as a child process, ready when its port answers."""

    def __init__(self, engine, args, log_path, packs=TEST_PACKS, root=ROOT,
                 env=None):
        skip_unless_runnable(engine)
        self.engine = engine
        self.port = free_port()
        self.url = 'http://127.0.0.1:%d' % self.port
        self.log_path = log_path
        self.log = open(log_path, 'wb')
        self.process = subprocess.Popen(
            [sys.executable, os.path.join(root, 'server.py'), '-e', engine,
             '-p', str(self.port)] + list(args)
            + (['--packs', str(packs)] if packs else []),
            cwd=root, stdout=self.log, stderr=subprocess.STDOUT,
            env=dict(os.environ, **(env or {})))
        self.wait_ready()

    def wait_ready(self, timeout=60):
        def ready():
            if self.process.poll() is not None:
                raise RuntimeError('%s exited with %s:\n%s' % (
                    self.engine, self.process.returncode, self.output()))
            return answers('127.0.0.1', self.port, 0.2)
        try:
            wait_until(ready, timeout, 0.05)
        except AssertionError:
            self.stop()
            raise RuntimeError('%s did not start:\n%s'
                               % (self.engine, self.output()))

    def output(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, 'rb') as f:
            return f.read().decode('utf-8', 'replace')

    def stop(self, sig=signal.SIGTERM, timeout=20):
        terminate(self.process, timeout, sig)
        self.log.close()
        return self.process.returncode


def engine_args(request, engine):
    """Command-line arguments pointing an engine at the test databases."""
    if '-postgres-' in engine:
        return ['--postgres', request.getfixturevalue('postgres').dsn]
    if '-sqlalchemy-' in engine:    # its own tables, loaded
        return ['--postgres', request.getfixturevalue('postgres_orm').dsn]
    if '-django-' in engine:    # its own tables, loaded; their owner's
        request.getfixturevalue('django_orm_loaded')
        return ['--postgres', request.getfixturevalue('postgres').owner_dsn]
    if '-rediscluster-' in engine:
        from data_interface.rediscluster.address import url
        a = request.getfixturevalue('rediscluster').address
        return ['--rediscluster', url(a)]
    if '-redis-' in engine:
        a = request.getfixturevalue('redis').address
        return ['--redis', 'redis://%s:%s@%s:%d/0' % (a.user, a.password,
                                                      a.host, a.port)]
    a = tarantool_address(request.getfixturevalue('tarantool'))
    return ['--tarantool', '%s:%d' % (a.host, a.port)]


@pytest.fixture(scope='session')
def start_server(tmp_path_factory):
    """start_server(engine, *args) -> a running ServerProcess, stopped at
    the end of the test session."""
    started = []
    logs = tmp_path_factory.mktemp('server-logs')

    def start(engine, *args):
        server = ServerProcess(engine, args,
                               str(logs / ('%s-%d.log' % (engine, len(started)))))
        started.append(server)
        return server
    yield start
    # Side by side: each waits for its own visits to be written.
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(ServerProcess.stop, started))


@pytest.fixture(scope='session')
def shared_server(request, start_server):
    """shared_server(engine) -> a running ServerProcess on the test databases
    with no other option, started once and shared by every module that only
    talks to it (pages, hostile bytes, pipelining)."""
    servers = {}

    def get(engine):
        if engine not in servers:
            servers[engine] = start_server(engine, *engine_args(request, engine))
        return servers[engine]
    return get


async def fetch(url, cookie=None, form=None):
    """(status, headers, text) of a GET, or a POST of `form`, with the
    session `cookie`."""
    from bench.pagecheck import client
    async with client(cookie) as s:
        method = s.post if form else s.get
        async with method(url, data=form) as r:
            return r.status, r.headers, await r.text()
