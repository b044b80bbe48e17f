"""Every default of the project, once: paths, addresses, accounts, limits.

server.py builds one Settings from its options and the environment and
hands it down (databases, pages, managed instances, edge); bench and tests
start from DEFAULTS. A Settings is frozen: change it with replace().
"""
import os
from dataclasses import dataclass, field, replace

from data_interface.address import ADMIN_USER, APP_USER, LOOPBACK, OWNER_USER

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Ballot pairs: twice the votes, for a voter as quick as the vote limit
# allows, plus reloads. Ballots live 10 minutes, so an address then holds
# at most some 2,600: filling the database's ballot cap (a million or more;
# past it the oldest ballots, voters' too, are replaced) takes hundreds of
# addresses, not one.
REMOTE_LIMITS = {'sessions': '30/m', 'votes': '60/m', 'ballots': '120/m'}
# Environment settings that move the local databases' ports (README).
PORT_ENVIRONMENT = {'tarantool_port': 'STICKERS_TARANTOOL_PORT',
                    'postgres_port': 'STICKERS_POSTGRES_PORT',
                    'redis_port': 'STICKERS_REDIS_PORT',
                    'rediscluster_port': 'STICKERS_REDISCLUSTER_PORT',
                    'tarantool_vinyl_port': 'STICKERS_TARANTOOL_VINYL_PORT'}
# Seconds between /about's renders; bench.instructions sets it past a
# count's end, so that no render falls inside one run and not the other.
REFRESH_ENVIRONMENT = 'STICKERS_REFRESH_EVERY'
# Not 5432: a system cluster there is left alone.
POSTGRES_PORT = 5433
REDIS_FSYNC = ('always', 'everysec')
# Tarantool's storage engines for the site's spaces (--tarantool-engine).
STORAGES = ('memtx', 'vinyl')


@dataclass(frozen=True)
class Settings:
    root: str = ROOT
    # The site.
    host: str = '127.0.0.1'
    port: int = 1717
    refresh_every: float = 5.0     # seconds between /about renders (sweeps)
    ballot_ttl: int = 600          # seconds a pair of ballots stays valid
    delay: float = 0.0             # ms every page that waits is answered late
    # The edge (edge.py): seconds, connections.
    header_timeout: float = 10.0
    body_timeout: float = 10.0
    keepalive_timeout: float = 15.0
    max_connections: int = 10000
    # Processes serving the port (server.py --workers); each binds it with
    # SO_REUSEPORT (reuse_port) when there are several.
    workers: int = 1
    reuse_port: bool = False
    # Front servers (addresses) whose X-Forwarded-For names the visitor.
    proxies: tuple = ()
    # Per-IP limits (pages.limits rates, '0': off); None: REMOTE_LIMITS on
    # a host beyond the loopback or behind a proxy, off on the loopback
    # alone (the benchmark). Ballots are counted per address and per
    # session.
    limit_sessions: str = None
    limit_votes: str = None
    limit_ballots: str = None
    # The key that signs session cookies (pages.sessions), kept in
    # session_key_file; None: a Site makes a random one of its own.
    session_key: str = field(default=None, repr=False)
    # Databases: the ones given (--tarantool: a TarantoolAddress,
    # --postgres: a URL, --redis: a RedisAddress, --rediscluster: a
    # ClusterAddress), else local ones with these defaults.
    tarantool: object = None
    postgres: str = None
    redis: object = None
    rediscluster: object = None
    # Read replicas: given (--tarantool-replica: TarantoolAddresses,
    # --postgres-replica: URLs), or this many started beside the local
    # primary (--replicas); a replica lagging more than replica_lag seconds
    # serves no reads until it catches up (data_interface/replicated.py).
    tarantool_replicas: tuple = ()
    postgres_replicas: tuple = ()
    replicas: int = 0
    replica_lag: float = 1.0
    db_host: str = '127.0.0.1'
    tarantool_port: int = 3301
    # None: none set (STICKERS_POSTGRES_PORT), so the local cluster takes
    # the free port it chose when POSTGRES_PORT was taken, remembered in
    # var/postgres/port, else POSTGRES_PORT. A port set wins over that.
    postgres_port: int = None
    redis_port: int = 6380         # not 6379: a system Redis is left alone
    redis_memory: int = 1024 ** 3  # the local Redis's maxmemory, bytes
    # The local Redis Cluster's first node (its six: this port and the
    # five above, cluster bus +10000); they share redis_memory.
    rediscluster_port: int = 7001
    # When the local Redis fsyncs its append-only file: 'always' (before
    # it answers) or 'everysec' (REDIS_FSYNC).
    redis_fsync: str = 'always'
    database: str = 'stickers'
    app_user: str = APP_USER
    admin_user: str = ADMIN_USER     # Tarantool's and Redis's data loader
    owner_user: str = OWNER_USER     # PostgreSQL's schema and loader
    # The local Tarantool's storage engine. Each engine has its own local
    # instance, port and directory (managed_tarantool_port; Tarantool's
    # directory() in runtime/databases/table.py), so a memtx one's data is
    # never opened as vinyl's, and both may run.
    tarantool_engine: str = 'memtx'
    tarantool_vinyl_port: int = 3302
    # The managed Tarantool's expiry (app.lua; Redis's limits likewise):
    # seconds idle, caps (None: what fits its memory; on vinyl 1,000,000),
    # seconds between sweeps.
    session_ttl: float = 900
    max_sessions: int = None
    max_ballots: int = None
    sweep_every: float = 5.0
    # At start, remove the sessions and ballots the database holds (the
    # bench, so that no engine sweeps up the visitors of the one before).
    forget_visitors: bool = False
    # The local Tarantool's snapshots and Redis's AOF rewrites made only at
    # start, when due, never while serving (the bench: a timed point does
    # not take one; docs/benchmark.md states their cost apart).
    snapshots_at_start: bool = False
    # The data set loaded into an empty database: generated with this many
    # packs, or a JSON dump (dataset/dump.py).
    packs: int = 300
    dump: str = None

    # Paths, all under root: var/ holds what the project makes (images, the
    # local databases).
    var = property(lambda self: os.path.join(self.root, 'var'))
    images = property(lambda self: os.path.join(self.var, 'img'))
    static = property(lambda self: os.path.join(self.root, 'static'))
    templates = property(lambda self: os.path.join(self.root, 'templates'))
    managed_tarantool_port = property(lambda self: {
        'memtx': self.tarantool_port,
        'vinyl': self.tarantool_vinyl_port}[self.tarantool_engine])
    session_key_file = property(
        lambda self: os.path.join(self.var, 'session.key'))

    def limit(self, what):
        """The per-IP rate of 'sessions', 'votes' or 'ballots' in force."""
        text = getattr(self, 'limit_' + what)
        if text is not None:
            return text
        local = self.host.startswith(LOOPBACK) and not self.proxies
        return '0' if local else REMOTE_LIMITS[what]


DEFAULTS = Settings()


def port_setting(environ, name, default):
    text = environ.get(name, '')
    if not text:
        return default
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError('%s must be a port number, not %r' % (name, text))
    return int(text)


def refresh_setting(environ, default):
    text = environ.get(REFRESH_ENVIRONMENT, '')
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = 0
    if not 0 < value <= 86400:
        raise ValueError('%s must be seconds, 0 < S <= 86400, not %r'
                         % (REFRESH_ENVIRONMENT, text))
    return value


def from_environment(settings=DEFAULTS, environ=None):
    """settings with the ports the environment moves (for tests and a
    second checkout) and /about's refresh period; ValueError for a bad
    one."""
    environ = os.environ if environ is None else environ
    moved = {key: port_setting(environ, name, getattr(settings, key))
             for key, name in PORT_ENVIRONMENT.items()}
    moved['refresh_every'] = refresh_setting(environ, settings.refresh_every)
    return replace(settings, **moved)


__all__ = ['DEFAULTS', 'POSTGRES_PORT', 'ROOT', 'Settings', 'STORAGES',
           'from_environment', 'replace']
