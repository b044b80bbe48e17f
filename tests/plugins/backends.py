"""The backends of the contract suite (and of the in-process page tests):
the `backend` fixture runs a test once per driver, mode and database."""
import functools
import importlib.util

import pytest

from data_interface.address import as_admin
from plugins.databases import tarantool_address


class Backend:
    """How the contract suite makes DataInterface objects for one backend:
    new() for the app's account, admin() for the loader's, via(port) for the
    app's account reaching the database through 127.0.0.1:port (a relay;
    None where there is none);
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


def _postgres_backend(request, driver='asyncpg'):
    if driver == 'psycopg':     # CPython 3.10+, not .venv37
        from data_interface.postgres.psycopg_data import PsycopgData as Data
    else:
        from data_interface.postgres.asyncpg_data import PostgresData as Data
    server = request.getfixturevalue('postgres')
    dsn, owner = server.dsn, server.owner_dsn
    return Backend(lambda: Data(dsn), lambda: Data(owner),
                   lambda port: Data(dsn.replace(
                       ':%d/' % server.port, ':%d/' % port), timeout=2))


def _sqlalchemy_backend(request):
    from data_interface.orm.sqlalchemy_data import SqlalchemyData as Data
    server = request.getfixturevalue('postgres_orm')
    dsn, owner = server.dsn, server.owner_dsn
    return Backend(lambda: Data(dsn), lambda: Data(owner),
                   lambda port: Data(dsn.replace(
                       ':%d/' % server.port, ':%d/' % port), timeout=2))


def _django_backend(request):
    """The Django ORM's tables, loaded by its own loader; Django has one
    database per process, so the site's account is the owner, as the
    loader's, and via(port) points that database at the relay until the
    test ends."""
    from data_interface.django_orm.data import DjangoData
    server = request.getfixturevalue('postgres')
    owner = server.owner_dsn
    request.getfixturevalue('django_orm_loaded')

    def via(port):
        _django_port(port)
        request.addfinalizer(lambda: _django_port(server.port))
        return DjangoData(owner.replace(':%d/' % server.port, ':%d/' % port),
                          timeout=2)
    return Backend(lambda: DjangoData(owner), lambda: DjangoData(owner), via)


def _django_port(port):
    """Django's one database at this port, with a new pool."""
    from django.db import connections
    connections.settings['default']['PORT'] = str(port)
    connections['default'].close_pool()


def _redis_backend(request, mode):
    from data_interface.redis.redis_data import RedisData
    server = request.getfixturevalue('redis')
    address, admin = server.address, server.admin_address
    return Backend(lambda: RedisData(address, mode),
                   lambda: RedisData(admin),
                   lambda port: RedisData(address._replace(port=port), mode,
                                          timeout=2))


def _rediscluster_backend(request):
    from data_interface.rediscluster.cluster_data import ClusterData
    server = request.getfixturevalue('rediscluster')
    address, admin = server.address, server.admin_address
    # No relay: a cluster client follows the slot map to every node. Each
    # vote in the rankings when answered (apply_every 0), as on the other
    # backends: the default's interval is held by tests/test_rediscluster.py.
    return Backend(lambda: ClusterData(address, apply_every=0),
                   lambda: ClusterData(admin), None)


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
    'rediscluster-pool': _rediscluster_backend,
}
# Drivers of the legacy environment (.venv37), tested there: see run.sh.
LEGACY_BACKENDS = set()
if importlib.util.find_spec('aiotarantool'):
    for _mode in ('one', 'multi'):
        BACKENDS['aiotarantool-' + _mode] = functools.partial(
            _tarantool_backend, mode=_mode, driver='aiotarantool')
        LEGACY_BACKENDS.add('aiotarantool-' + _mode)
if importlib.util.find_spec('psycopg_pool'):
    BACKENDS['postgres-psycopg-pool'] = functools.partial(
        _postgres_backend, driver='psycopg')
# Where both are: a new site of another driver has neither its module.
if importlib.util.find_spec('sqlalchemy') and \
        importlib.util.find_spec('data_interface.orm'):
    BACKENDS['postgres-sqlalchemy-pool'] = _sqlalchemy_backend
if importlib.util.find_spec('django') and \
        importlib.util.find_spec('data_interface.django_orm'):
    BACKENDS['postgres-django-pool'] = _django_backend


# Backends a relay cannot stand in front of (a cluster client follows the
# slot map to every node: tests/test_rediscluster.py kills nodes instead).
NO_RELAY = {'rediscluster-pool'}


def _params(names):
    return [pytest.param(name, marks=pytest.mark.legacy)
            if name in LEGACY_BACKENDS else name for name in sorted(names)]


@pytest.fixture(params=_params(BACKENDS))
def backend(request):
    return BACKENDS[request.param](request)


@pytest.fixture(params=_params(set(BACKENDS) - NO_RELAY))
def relayed_backend(request):
    """backend, of those whose link a relay can cut (via(port))."""
    return BACKENDS[request.param](request)


@pytest.fixture
def new_data(backend):
    """A factory of unstarted DataInterface objects for one backend."""
    return backend.new
