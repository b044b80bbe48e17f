"""The database table: each database the site runs on, described once (its
drivers and connection modes, its address and where else it may come from,
its replicas, its local server). The rest of the code reads it and never
names a database itself.
"""
import os
from collections import namedtuple
from importlib import import_module

from data_interface import address as addresses

# name: as in engine names; modes: its connection modes; modules: what must
# be importable; legacy / current: installs in the CPython 3.7 environment /
# the main one; data: 'module:Class' of its DataInterface.
Driver = namedtuple('Driver', 'name database modes modules legacy current data')


class Database:
    name = None
    drivers = ()
    replicas = False        # read replicas: --replicas, --NAME-replica
    metavar = given = replica = None    # the address option's help
    managed_class = None    # 'module:Class' of the local server, under var/
    replica_class = None    # 'module:Class' of its local read replica
    # 'module:Class' of what bench.py --ceilings does on it (bench/ceilings/;
    # named, not imported: runtime/ never imports bench); None: not measured.
    ceilings_class = None
    loader_limits = False   # its loader sets the sweep's limits (Redis's)

    @property
    def environment(self):
        """Where the address may come from instead of --NAME."""
        return 'STICKERS_' + self.name.upper()

    def parse(self, text):
        """The address in `text`; ValueError if it is not one."""
        raise NotImplementedError

    def data(self, driver, mode, address, replica=False):
        """An unstarted DataInterface of `driver` at `address`."""
        return _load(driver.data)(address, mode)

    def to_json(self, address):
        """The address as the parent hands it to its workers."""
        return list(address)

    def from_json(self, value):
        raise NotImplementedError

    def label(self, address):
        """How a log names a server at `address` (no password)."""
        return '%s:%s' % (address.host, address.port)

    def managed(self, directory, port=None, settings=None):
        """The local server in `directory`, not started."""
        from ..settings import DEFAULTS
        return _load(self.managed_class)(directory, port=port,
                                         settings=settings or DEFAULTS)

    def directory(self, settings):
        """The local server's directory under var/."""
        return os.path.join(settings.var, self.name)

    def managed_replica(self, primary, index, settings):
        """Local read replica number `index` of the local `primary`."""
        return _load(self.replica_class)(primary, index, settings)

    def ceilings(self):
        """What bench.py --ceilings does on it, or None."""
        return self.ceilings_class and _load(self.ceilings_class)(self)

    def url(self, address):
        """The address as --NAME takes it, with its password (for an
        environment variable, never a command line)."""
        raise NotImplementedError

    # A local server started apart from server.py (the soak, the floods):
    forks = False     # a process per connection (memory: the whole tree)
    pid_file = None

    def site_address(self, server):
        """The address server.py is given for the local `server`."""
        return server.address

    def loader(self, server):
        """An unstarted DataInterface of the loader's account on `server`."""
        return self.data(self.drivers[0], 'one', server.admin_address)

    async def configure(self, loader, session_ttl, max_sessions, max_ballots):
        """Set up what the loader sets before loading (Redis's limits)."""
        if not self.loader_limits:
            return
        await loader.start()
        try:
            await loader.configure(session_ttl, max_sessions, max_ballots)
        finally:
            await loader.close()

    def pid_paths(self, settings):
        """Where the local server of `settings` may keep its pid file."""
        return [os.path.join(self.directory(settings), self.pid_file)]

    server_binary = None

    def version_command(self):
        """The command that prints the server's version, or None if it is
        not installed."""
        import shutil
        found = shutil.which(self.server_binary)
        return found and [found, '--version']

    def storages(self, asked):
        """The storage engines a run serves it on (Tarantool's memtx and
        vinyl); [None] where it has one."""
        return [None]


class Tarantool(Database):
    name = 'tarantool'
    drivers = (
        Driver('tarantool', 'tarantool', ('one', 'multi'), ('asynctnt',),
               True, True,
               'data_interface.tarantool.asynctnt_data:AsynctntData'),
        Driver('aiotarantool', 'tarantool', ('one', 'multi'),
               ('aiotarantool',), True, False,
               'data_interface.tarantool.aiotarantool_data:AiotarantoolData'),
    )
    replicas = True
    managed_class = 'runtime.databases.tarantool:ManagedTarantool'
    replica_class = 'runtime.databases.tarantool:ManagedReplica'
    metavar = '[USER:PASS@]HOST:PORT'
    given = ('a Tarantool running data_interface/tarantool/instance.lua, '
             'instead of a local one under var/')
    replica = 'a read-only replica'
    pid_file = 'tarantool.pid'
    server_binary = 'tarantool'
    ceilings_class = 'bench.ceilings.tarantool_db:TarantoolCeilings'

    def storages(self, asked):
        return list(asked)

    def directory(self, settings):
        # Each storage engine its own (settings.managed_tarantool_port).
        return os.path.join(settings.var, self.name + {
            'memtx': '', 'vinyl': '-vinyl'}[settings.tarantool_engine])

    def parse(self, text):
        return addresses.parse_tarantool(text)

    def from_json(self, value):
        return addresses.TarantoolAddress(*value)

    def url(self, a):
        return '%s:%s@%s:%d' % (a.user, a.password, a.host, a.port)


class Postgres(Database):
    name = 'postgres'
    drivers = (
        Driver('postgres', 'postgres', ('pool',), ('asyncpg',), True, True,
               'data_interface.postgres.asyncpg_data:PostgresData'),
        # psycopg 3.3 needs CPython 3.10 or newer.
        Driver('psycopg', 'postgres', ('pool',), ('psycopg', 'psycopg_pool'),
               False, True,
               'data_interface.postgres.psycopg_data:PsycopgData'),
        # SQLAlchemy 2's asyncio ORM over asyncpg, on tables of its own.
        Driver('sqlalchemy', 'postgres', ('pool',), ('sqlalchemy', 'asyncpg'),
               False, True,
               'data_interface.orm.sqlalchemy_data:SqlalchemyData'),
        # Tables of its own, through the Django ORM on psycopg 3.
        Driver('django', 'postgres', ('pool',),
               ('django', 'psycopg', 'psycopg_pool'), False, True,
               'data_interface.django_orm.data:DjangoData'),
    )
    replicas = True
    managed_class = 'runtime.databases.postgres:ManagedPostgres'
    replica_class = ('runtime.databases.postgres_standby:'
                     'ManagedPostgresStandby')
    metavar = 'postgresql://USER:PASS@HOST:PORT/DB'
    given = ('a PostgreSQL database (the schema is applied at start), '
             'instead of a local cluster under var/')
    replica = 'a hot standby'
    ceilings_class = 'bench.ceilings.postgres_db:PostgresCeilings'

    def parse(self, text):
        return addresses.parse_postgres(text)

    def data(self, driver, mode, address, replica=False):
        return _load(driver.data)(address, replica=replica)

    def to_json(self, dsn):
        return dsn

    def from_json(self, value):
        return value

    def label(self, dsn):
        return dsn.rsplit('@', 1)[-1]

    def url(self, dsn):
        return dsn

    forks = True

    def version_command(self):
        from .postgres import bindir
        try:
            return [os.path.join(bindir(), 'postgres'), '--version']
        except RuntimeError:
            return None

    def site_address(self, server):
        # The owner, as a database given by address is used.
        return server.owner_dsn

    def loader(self, server):
        return _load(self.drivers[0].data)(server.owner_dsn, min_size=1)

    def pid_paths(self, settings):
        from .postgres_layout import ELSEWHERE
        return [os.path.join(self.directory(settings), 'cluster', 'data',
                             'postmaster.pid'),
                os.path.join(ELSEWHERE, '*', 'data', 'postmaster.pid')]


class Redis(Database):
    name = 'redis'
    drivers = (
        Driver('redis', 'redis', ('one', 'pool'), ('redis',), True, True,
               'data_interface.redis.redis_data:RedisData'),
    )
    managed_class = 'runtime.databases.redis:ManagedRedis'
    metavar = 'redis://USER:PASS@HOST:PORT/DB'
    given = ('a Redis with the accounts of data_interface/redis/accounts.py '
             '(the functions are loaded at start), instead of a local one '
             'under var/')
    pid_file = 'redis.pid'
    server_binary = 'redis-server'
    loader_limits = True

    def parse(self, text):
        return addresses.parse_redis(text)

    def from_json(self, value):
        return addresses.RedisAddress(*value)

    def url(self, a):
        return 'redis://%s:%s@%s:%d/%s' % (a.user, a.password, a.host,
                                           a.port, a.db)


class RedisCluster(Database):
    """The site on a Redis Cluster (docs/databases.md): per-visitor data
    in 64 hash-tagged buckets, the rankings in one more group."""
    name = 'rediscluster'
    drivers = (
        Driver('rediscluster', 'rediscluster', ('pool',), ('redis',), False,
               True, 'data_interface.rediscluster.cluster_data:ClusterData'),
    )
    managed_class = 'runtime.databases.rediscluster:ManagedCluster'
    metavar = '[USER:PASS@]HOST:PORT,...'
    given = ('seed nodes of a Redis Cluster with the accounts of '
             'data_interface/rediscluster/accounts.py, instead of a local '
             'one under var/')
    pid_file = 'node0/redis.pid'
    server_binary = 'redis-server'
    loader_limits = True

    def parse(self, text):
        from data_interface.rediscluster.address import parse
        return parse(text)

    def from_json(self, value):
        from data_interface.rediscluster.address import from_json
        return from_json(value)

    def to_json(self, address):
        return [address.host, address.port, address.user, address.password,
                list(address.seeds)]

    def label(self, address):
        return ','.join(address.seeds)

    def url(self, a):
        from data_interface.rediscluster.address import url
        return url(a)


def _load(where):
    module, name = where.split(':')
    return getattr(import_module(module), name)


# One line per database, in the order engines are listed.
TABLE = (Tarantool(), Postgres(), Redis(), RedisCluster())
BY_NAME = {d.name: d for d in TABLE}
DRIVERS = tuple(driver for d in TABLE for driver in d.drivers)
DRIVER = {driver.name: driver for driver in DRIVERS}
REPLICATED = tuple(d for d in TABLE if d.replicas)
# The database the others are compared with, engine for engine.
REFERENCE = TABLE[0]


def of(engine):
    """The Database of an engine."""
    return BY_NAME[DRIVER[engine.driver].database]


def data_for(engine, address, replica=False):
    """An unstarted DataInterface of the engine's driver and mode at
    `address` (its database's: a Tarantool address, PostgreSQL DSN or Redis
    address; a read replica's, with replica)."""
    return of(engine).data(DRIVER[engine.driver], engine.mode, address,
                           replica)


def replicated(engine, primary, addresses, max_lag=None):
    """`primary` (an unstarted DataInterface) with reads spread over the
    engine's driver at these replica addresses, if any are given."""
    if not addresses:
        return primary
    from data_interface.replicated import MAX_LAG, Replicated
    replicas = [data_for(engine, a, replica=True) for a in addresses]
    for r in replicas:    # the pool size set for the primary's
        for size in ('min_size', 'max_size'):
            if hasattr(primary, size):
                setattr(r, size, getattr(primary, size))
    label = of(engine).label
    names = ['replica %d (%s)' % (i, label(a))
             for i, a in enumerate(addresses, 1)]
    return Replicated(primary, replicas, max_lag or MAX_LAG, names)
