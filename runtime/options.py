"""The options server.py, bench.py and the soak, crash and flood commands
share, each defined once with its one range check. server.py parses them on
the legacy interpreter too: CPython 3.7, nothing heavy imported."""
import argparse

from runtime.databases import table
from runtime.settings import DEFAULTS, REDIS_FSYNC


def ranged(kind, low, high=None, unit='', above=False):
    """An argparse type: a number of `kind` (int or float) from low (above
    it, if `above`) to high (no bound if None)."""
    if high is not None:
        span = '%g..%g%s' % (low, high, unit)
    else:
        span = ('above %g%s' if above else '%g%s or more') % (low, unit)
    word = 'whole number' if kind is int else 'number'

    def convert(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError('%r is not a %s' % (text, word))
        bottom = value > low if above else value >= low
        if not (bottom and (high is None or value <= high)):
            raise argparse.ArgumentTypeError('must be %s, not %s'
                                             % (span, text))
        return value
    return convert


def checked(parse, text=False):
    """An argparse type from a parser that raises ValueError: what the
    parser returns or, with text, the text it accepted."""
    def convert(value):
        try:
            parsed = parse(value)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e))
        return value if text else parsed
    return convert


PACKS = ranged(int, 2, 5000)
WORKERS = ranged(int, 1, 256)
REPLICAS = ranged(int, 0, 8)
DELAY = ranged(float, 0, 10000, ' ms')
SECONDS = ranged(int, 1)                # whole seconds of load
WARMUP = ranged(int, 0)                 # whole seconds, 0: none
INTERVAL = ranged(float, 0, above=True)     # seconds between two things
MINUTES = ranged(float, 0, above=True)
COUNT = ranged(int, 1)


def add_databases(p, text=False, note='', environment=False,
                  replicas=False):
    """--NAME for each database of the table: its address, parsed, or only
    checked with text; environment: say where else it may come from;
    replicas: --NAME-replica too, where the database has them. Returns
    {name: its argparse type}, for the same values from elsewhere."""
    types = {}
    for db in table.TABLE:
        types[db.name] = kind = checked(db.parse, text)
        since = ' (default: $%s)' % db.environment if environment else ''
        p.add_argument('--' + db.name, type=kind, metavar=db.metavar,
                       help=note + db.given + since)
        if replicas and db.replicas:
            p.add_argument('--%s-replica' % db.name, type=kind,
                           dest=db.name + '_replicas', action='append',
                           default=[], metavar=db.metavar,
                           help='%s of the --%s given, for the reads that '
                           'may lag (repeat for more)' % (db.replica, db.name))
    return types


def add_workers(p, note=''):
    p.add_argument('--workers', type=WORKERS, default=DEFAULTS.workers,
                   metavar='N', help=note + 'processes serving the port, '
                   '1..256 (default %d)' % DEFAULTS.workers)


def add_replicas(p, note=''):
    p.add_argument('--replicas', type=REPLICAS, default=DEFAULTS.replicas,
                   metavar='N', help=note + 'read-only replicas started beside '
                   'the local Tarantool or PostgreSQL, 0..8 (default %d)'
                   % DEFAULTS.replicas)


def add_packs(p, default=DEFAULTS.packs, note=''):
    p.add_argument('--packs', type=PACKS, default=default, metavar='N',
                   help=note + 'packs in the generated data set, 2..5000 '
                   '(default %d)' % DEFAULTS.packs)


def add_redis_fsync(p, default=DEFAULTS.redis_fsync, note=''):
    p.add_argument('--redis-fsync', choices=REDIS_FSYNC, default=default,
                   help=note + 'when the local Redis fsyncs its append-only '
                   'file: always, before it answers (default), or everysec '
                   '(a crash of the machine may lose the last second or two, '
                   "as with Tarantool's wal_mode write)")


def add_delay(p, default=DEFAULTS.delay, note=''):
    p.add_argument('--delay', type=DELAY, default=default, metavar='MS',
                   help=note + 'answer every page that asks the database MS '
                   'ms late, 0..10000: a slower build on purpose, to see that '
                   'bench.py compare notices (default 0)')


def add_duration(p, default, what='of load', flag='--duration', shown=None):
    """Whole seconds, 1 or more; shown: the default the help names, when
    the option's own is None."""
    p.add_argument(flag, type=SECONDS, default=default, metavar='SECONDS',
                   help='seconds %s (default %s)'
                   % (what, default if shown is None else shown))


def add_warmup(p, default, what='of untimed load first', shown=None):
    """Whole seconds, 0 (none) or more."""
    p.add_argument('--warmup', type=WARMUP, default=default,
                   metavar='SECONDS', help='seconds %s (default %s)'
                   % (what, default if shown is None else shown))
