"""The session's own Tarantool (memtx and vinyl), PostgreSQL and Redis, each
in a temporary directory on a free port with a small generated data set."""
import asyncio
import contextlib
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor

import pytest

from data_interface.address import TarantoolAddress, as_admin
from runtime.databases.load import data_set
from runtime.databases.tarantool import ManagedTarantool
from runtime.databases.postgres import ManagedPostgres
from runtime.databases.redis import ManagedRedis
from runtime.processes import bindable, free_port
from runtime.settings import DEFAULTS, replace

TEST_PACKS = 10


def replicas_port(count=2):
    """A free port whose replicas' ports (+10, +20, ...) are free too."""
    while True:
        port = free_port()
        if port + 10 * count < 65536 and all(bindable(
                '127.0.0.1', port + 10 * k) for k in range(1, count + 1)):
            return port


def start_tarantool(directory, **env):
    # The accounts' default passwords, which tests pass around (loopback).
    env = dict(dict(TNT_APP_PASSWORD='sticker_app',
                    TNT_ADMIN_PASSWORD='sticker_admin'), **env)
    server = ManagedTarantool(directory, port=replicas_port(), env=env)
    server.start()
    return server


def tarantool_address(server):
    return TarantoolAddress(server.host, server.port,
                            'sticker_app', 'sticker_app')


def small_data_set():
    """The data set the test databases hold: the settings' own (generated,
    or a site's dump), with TEST_PACKS packs when generated."""
    return data_set(replace(DEFAULTS, packs=TEST_PACKS))


async def load_small(data):
    """Load the test data set through an admin DataInterface."""
    await data.start()
    try:
        return await data.load(small_data_set())
    finally:
        await data.close()


@contextlib.asynccontextmanager
async def own_loaded(server, configure, data_class, **limits):
    """(server, data) of a test's own Redis or cluster, just started:
    configured with `limits`, the small data set loaded and the app's
    data_class on it started; both stopped after."""
    try:
        configure(server, **limits)
        await load_small(data_class(server.admin_address))
        data = data_class(server.address)
        await data.start()
        try:
            yield server, data
        finally:
            await data.close()
    finally:
        server.stop()


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


def start_redis(directory, memory=None, settings=DEFAULTS,
                rewrite_after=None):
    server = ManagedRedis(directory, port=free_port(), memory=memory,
                          passwords=REDIS_PASSWORDS, settings=settings)
    server.rewrite_after = rewrite_after or server.rewrite_after
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


# The cluster's accounts: the single Redis's two and the one its replicas
# and redis-cli log in as.
CLUSTER_PASSWORDS = dict(REDIS_PASSWORDS, sticker_cluster='sticker_cluster')


def start_rediscluster(directory):
    from runtime.databases.rediscluster import (ManagedCluster,
                                                free_cluster_port)
    server = ManagedCluster(directory, port=free_cluster_port(),
                            passwords=CLUSTER_PASSWORDS)
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    return server


def configure_rediscluster(server, **limits):
    """Load the functions and set the limits, as server.py does."""
    from data_interface.rediscluster.cluster_data import ClusterData

    async def configure():
        admin = ClusterData(server.admin_address)
        await admin.start()
        try:
            return await admin.configure(
                limits.get('session_ttl', 900), limits.get('max_sessions'),
                limits.get('max_ballots'),
                sweep_every=limits.get('sweep_every', 5.0))
        finally:
            await admin.close()
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, configure()).result()


@pytest.fixture(scope='session')
def rediscluster(tmp_path_factory):
    """A Redis Cluster (three primaries, three replicas) with the small
    data set loaded; it sweeps hourly, as the Redis fixture does."""
    from data_interface.rediscluster.cluster_data import ClusterData
    server = start_rediscluster(str(tmp_path_factory.mktemp('rediscluster')))
    try:
        configure_rediscluster(server, sweep_every=3600)
        load_small_dataset(ClusterData(server.admin_address))
        yield server
    finally:
        server.stop()


@pytest.fixture(scope='session')
def django_orm_loaded(postgres):
    """The small data set in the Django ORM backend's own tables too."""
    from data_interface.django_orm.data import DjangoData
    load_small_dataset(DjangoData(postgres.owner_dsn))


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


@pytest.fixture(scope='session')
def postgres_orm(postgres):
    """The same cluster with the small data set loaded into the SQLAlchemy
    driver's own schema too (its loader makes it)."""
    from data_interface.orm.sqlalchemy_data import SqlalchemyData
    load_small_dataset(SqlalchemyData(postgres.owner_dsn))
    return postgres
