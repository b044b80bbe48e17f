"""Real databases and real servers for the tests: the session starts its own
Tarantool (and PostgreSQL) in a temporary directory, loads a small generated
data set, and starts server.py processes on free ports."""
import asyncio
import functools
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dataset  # noqa: E402
from runtime import engines  # noqa: E402
from data_interface.address import TarantoolAddress, as_admin  # noqa: E402
from runtime.databases.tarantool import ManagedTarantool  # noqa: E402
from runtime.databases.postgres import ManagedPostgres  # noqa: E402
from runtime.databases.redis import ManagedRedis  # noqa: E402
from runtime.processes import answers, free_port, terminate  # noqa: E402,F401
from runtime.settings import ROOT  # noqa: E402

TEST_PACKS = 10
ARTIFACTS = os.path.join(ROOT, 'test-artifacts')


def start_tarantool(directory, **env):
    # The accounts' default passwords, which tests pass around (loopback).
    env = dict(dict(TNT_APP_PASSWORD='sticker_app',
                    TNT_ADMIN_PASSWORD='sticker_admin'), **env)
    server = ManagedTarantool(directory, port=free_port(), env=env)
    server.start()
    return server


def tarantool_address(server):
    return TarantoolAddress(server.host, server.port,
                            'sticker_app', 'sticker_app')


async def load_small(data):
    """Load the test data set through an admin DataInterface."""
    await data.start()
    try:
        return await data.load(dataset.generate(packs=TEST_PACKS))
    finally:
        await data.close()


async def fetch(url, cookie=None, form=None):
    """(status, headers, text) of a GET, or a POST of `form`, with the
    session `cookie`."""
    from bench.pagecheck import client
    async with client(cookie) as s:
        method = s.post if form else s.get
        async with method(url, data=form) as r:
            return r.status, r.headers, await r.text()


def load_small_dataset(data):
    # In a thread: a fixture may be set up from inside a running event loop.
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, load_small(data)).result()


def loaded_tarantool(directory, engine):
    """A Tarantool instance on `engine` with the small data set loaded; its
    expiry fiber stays idle so that tests see their short-lived ballots
    expire, not go."""
    from data_interface.tarantool.asynctnt_data import AsynctntData
    # Its expiry fiber would race the contract's expiry tests: sweep hourly.
    server = start_tarantool(directory, TNT_SWEEP_EVERY='3600',
                             TNT_ENGINE=engine)
    try:
        load_small_dataset(AsynctntData(as_admin(tarantool_address(server))))
    except BaseException:
        server.stop()
        raise
    return server


@pytest.fixture(scope='session')
def tarantool(tmp_path_factory):
    """Tarantool on memtx, the small data set loaded."""
    server = loaded_tarantool(str(tmp_path_factory.mktemp('tarantool')),
                              'memtx')
    yield server
    server.stop()


@pytest.fixture(scope='session')
def tarantool_vinyl(tmp_path_factory):
    """Tarantool on vinyl, the small data set loaded."""
    server = loaded_tarantool(str(tmp_path_factory.mktemp('tarantool-vinyl')),
                              'vinyl')
    yield server
    server.stop()


# The accounts' passwords of the test Redis, which tests pass around.
REDIS_PASSWORDS = {'sticker_app': 'sticker_app',
                   'sticker_admin': 'sticker_admin'}


def start_redis(directory, memory=None):
    server = ManagedRedis(directory, port=free_port(), memory=memory,
                          passwords=REDIS_PASSWORDS)
    server.start()
    return server


def configure_redis(server, **limits):
    """Load the functions and set the limits, as server.py does."""
    from data_interface.redis.redis_data import RedisData

    async def configure():
        admin = RedisData(server.admin_address)
        await admin.start()
        try:
            return await admin.configure(limits.get('session_ttl', 900),
                                         limits.get('max_sessions'),
                                         limits.get('max_ballots'),
                                         sweep_every=limits.get('sweep_every',
                                                                5.0))
        finally:
            await admin.close()
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, configure()).result()


@pytest.fixture(scope='session')
def redis(tmp_path_factory):
    """A Redis with the small data set loaded."""
    from data_interface.redis.redis_data import RedisData
    server = start_redis(str(tmp_path_factory.mktemp('redis')))
    try:
        # The servers on it would race the contract's expiry tests: as
        # Tarantool's, it sweeps for them hourly.
        configure_redis(server, sweep_every=3600)
        load_small_dataset(RedisData(server.admin_address))
        yield server
    finally:
        server.stop()


def start_postgres():
    """A cluster of our own on a free port; its directory is not under
    pytest's tmp_path, which the postgres user (when root) cannot enter."""
    server = ManagedPostgres(tempfile.mkdtemp(prefix='stickers-test-pg-'),
                             port=free_port())
    try:
        server.start()
    except BaseException:
        shutil.rmtree(server.directory, ignore_errors=True)
        raise
    return server


def remove_postgres(server):
    try:
        if server.running():
            server.started = True   # whoever started it, stop it
            server.stop()
    finally:
        shutil.rmtree(server.directory, ignore_errors=True)


@pytest.fixture(scope='session')
def postgres():
    """A PostgreSQL cluster with the small data set loaded."""
    from data_interface.postgres.asyncpg_data import PostgresData
    server = start_postgres()
    try:
        load_small_dataset(PostgresData(server.owner_dsn))
        yield server
    finally:
        remove_postgres(server)


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
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError('%s exited with %s:\n%s' % (
                    self.engine, self.process.returncode, self.output()))
            if answers('127.0.0.1', self.port, 0.2):
                return
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError('%s did not start:\n%s'
                                   % (self.engine, self.output()))
            time.sleep(0.05)

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
    for server in started:
        server.stop()


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


class Backend:
    """How the contract suite makes DataInterface objects for one backend:
    new() for the app's account, admin() for the loader's, via(port) for the
    app's account reaching the database through 127.0.0.1:port (a relay);
    engine: Tarantool's storage engine (None for PostgreSQL)."""

    def __init__(self, new, admin, via, engine=None):
        self.new, self.admin, self.via = new, admin, via
        self.engine = engine


def _tarantool_backend(request, mode, driver='asynctnt', engine='memtx'):
    if driver == 'aiotarantool':
        from data_interface.tarantool.aiotarantool_data import (
            AiotarantoolData as Data)
    else:
        from data_interface.tarantool.asynctnt_data import AsynctntData as Data
    fixture = 'tarantool' if engine == 'memtx' else 'tarantool_' + engine
    address = tarantool_address(request.getfixturevalue(fixture))
    return Backend(lambda: Data(address, mode), lambda: Data(as_admin(address)),
                   lambda port: Data(address._replace(port=port), mode), engine)


def _postgres_backend(request):
    from data_interface.postgres.asyncpg_data import PostgresData
    server = request.getfixturevalue('postgres')
    dsn, owner = server.dsn, server.owner_dsn
    return Backend(lambda: PostgresData(dsn), lambda: PostgresData(owner),
                   lambda port: PostgresData(dsn.replace(
                       ':%d/' % server.port, ':%d/' % port), timeout=2))


def _redis_backend(request, mode):
    from data_interface.redis.redis_data import RedisData
    server = request.getfixturevalue('redis')
    address, admin = server.address, server.admin_address
    return Backend(lambda: RedisData(address, mode),
                   lambda: RedisData(admin),
                   lambda port: RedisData(address._replace(port=port), mode,
                                          timeout=2))


# Contract-suite backends: name -> (pytest request -> Backend)
BACKENDS = {
    'tarantool-one': lambda request: _tarantool_backend(request, 'one'),
    'tarantool-multi': lambda request: _tarantool_backend(request, 'multi'),
    'tarantool-vinyl-one': lambda request: _tarantool_backend(
        request, 'one', engine='vinyl'),
    'tarantool-vinyl-multi': lambda request: _tarantool_backend(
        request, 'multi', engine='vinyl'),
    'postgres-pool': _postgres_backend,
    'redis-one': lambda request: _redis_backend(request, 'one'),
    'redis-pool': lambda request: _redis_backend(request, 'pool'),
}
# Drivers of the legacy environment (.venv37), tested there: see run.sh.
LEGACY_BACKENDS = set()
if importlib.util.find_spec('aiotarantool'):
    for _mode in ('one', 'multi'):
        BACKENDS['aiotarantool-' + _mode] = functools.partial(
            _tarantool_backend, mode=_mode, driver='aiotarantool')
        LEGACY_BACKENDS.add('aiotarantool-' + _mode)


def _psycopg_backend(request):
    """PostgreSQL's second driver, psycopg 3 (CPython 3.10+, not .venv37)."""
    from data_interface.postgres.psycopg_data import PsycopgData
    server = request.getfixturevalue('postgres')
    dsn, owner = server.dsn, server.owner_dsn
    return Backend(lambda: PsycopgData(dsn), lambda: PsycopgData(owner),
                   lambda port: PsycopgData(dsn.replace(
                       ':%d/' % server.port, ':%d/' % port), timeout=2))


if importlib.util.find_spec('psycopg_pool'):
    BACKENDS['postgres-psycopg-pool'] = _psycopg_backend


@pytest.fixture(params=[
    pytest.param(name, marks=pytest.mark.legacy) if name in LEGACY_BACKENDS
    else name for name in sorted(BACKENDS)])
def backend(request):
    return BACKENDS[request.param](request)


@pytest.fixture
def new_data(backend):
    """A factory of unstarted DataInterface objects for one backend."""
    return backend.new


# The benchmark's tests need the main environment (matplotlib, 3.8+).
collect_ignore = (['test_bench.py', 'test_ceilings.py', 'test_pythons.py']
                  if sys.version_info < (3, 8) else [])
