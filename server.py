"""Serve the sticker site with one engine.

    python server.py -e ENGINE [-p PORT] [-l LEVEL] [--workers N]
                     [--tarantool HOST:PORT] [--tarantool-engine memtx|vinyl]
                     [--postgres postgresql://USER:PASS@HOST:PORT/DB]
                     [--redis redis://USER:PASS@HOST:PORT/DB]
                     [--redis-fsync always|everysec]
                     [--header-timeout S] [--body-timeout S]
                     [--keepalive-timeout S] [--max-connections N]
                     [--limit-sessions N/m] [--limit-votes N/m]
                     [--limit-ballots N/m]
    python server.py --list

Engines of the legacy stack (japronto, aiotarantool) need CPython 3.7: from
any other interpreter the command runs itself again in .venv37. With
--workers N, N processes serve the port (see runtime/workers.py). The database
addresses, which may hold passwords, may come from the environment instead
(STICKERS_TARANTOOL, STICKERS_POSTGRES, STICKERS_REDIS) or from a file of arguments, one
per line: python server.py -e ENGINE @FILE.
"""
import argparse
import asyncio
import logging
import os
import sys

from runtime import engines, frameworks, options
from runtime import settings
from runtime.databases import table
from data_interface import DataUnavailable
from data_interface.address import on_loopback

LEVELS = ('DEBUG', 'INFO', 'WARNING', 'ERROR', 'CRITICAL')
log = logging.getLogger('server')


def parse_args(argv):
    d = settings.DEFAULTS
    # @FILE: arguments from a file, one per line (addresses with passwords).
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0],
                                fromfile_prefix_chars='@')
    p.add_argument('-e', '--engine', help='engine name (see --list)')
    p.add_argument('-p', '--port', type=int, default=d.port)
    p.add_argument('-l', '--level', default='INFO', type=str.upper,
                   choices=LEVELS, help='log level (default INFO)')
    p.add_argument('--host', default=d.host)
    p.add_argument('--list', action='store_true',
                   help='list every engine and whether it runs here')
    options.add_workers(p)
    # Given by the parent to the workers it starts (workers.py).
    p.add_argument('--worker', type=int, help=argparse.SUPPRESS)

    types = options.add_databases(p, note='use ', environment=True,
                                  replicas=True)
    options.add_replicas(p)
    p.add_argument('--replica-lag', type=float, default=d.replica_lag,
                   metavar='SECONDS',
                   help='a replica lagging more serves no reads until it '
                        'has caught up (default %g)' % d.replica_lag)
    p.add_argument('--tarantool-engine', choices=settings.STORAGES,
                   default=d.tarantool_engine,
                   help="storage engine of the local Tarantool's spaces, "
                        'each with its own instance: memtx (in memory, port '
                        '%d) or vinyl (on disk, port %d); default %s'
                        % (d.tarantool_port, d.tarantool_vinyl_port,
                           d.tarantool_engine))
    options.add_redis_fsync(p)
    options.add_packs(p)
    p.add_argument('--data', metavar='DUMP.json',
                   help='load this sticker dump (see dataset/dump.py) instead '
                        'of the generated data set into an empty database')
    p.add_argument('--forget-visitors', action='store_true',
                   help='at start, remove every session and ballot the '
                        'database holds: its visitors lose their sessions and '
                        'unspent ballots (a benchmark starts each engine so); '
                        'stickers and votes stay')
    p.add_argument('--snapshots-at-start', action='store_true',
                   help="the local Tarantool's snapshots and Redis's "
                        'append-only file rewrites only at start, when due, '
                        'never while serving (a benchmark starts each engine '
                        "so): a site's logs grow until it restarts")
    add_edge_args(p, d)
    args = p.parse_args(argv)
    # The addresses may come from the environment instead, off the command
    # line that `ps` shows.
    for db in table.TABLE:
        given = os.environ.get(db.environment)
        if getattr(args, db.name) is None and given:
            try:
                setattr(args, db.name, types[db.name](given))
            except argparse.ArgumentTypeError as e:
                p.error('%s: %s' % (db.environment, e))
    args.settings = build_settings(p, args)
    if not args.list and not args.engine:
        p.error('an engine is required: -e ENGINE (see --list)')
    if not 0 < args.port < 65536:
        p.error('port must be 1..65535')
    check_replicas(p, args)
    check_front(p, args)
    if args.data:
        import dataset
        try:
            dataset.read_dump(args.data)
        except (OSError, dataset.DumpError) as e:
            p.error(str(e))
    return args


def addresses(text):
    """'127.0.0.1,::1' -> ('127.0.0.1', '::1'), each a valid IP address."""
    import ipaddress
    found = []
    for part in filter(None, (x.strip() for x in text.split(','))):
        try:
            found.append(str(ipaddress.ip_address(part)))
        except ValueError:
            raise argparse.ArgumentTypeError('%r is not an IP address' % part)
    return tuple(found)


def add_edge_args(p, d):
    p.add_argument('--header-timeout', type=float, default=d.header_timeout,
                   metavar='SECONDS', help='time for a request head to '
                   'arrive from its first byte (default %g)' % d.header_timeout)
    p.add_argument('--body-timeout', type=float, default=d.body_timeout,
                   metavar='SECONDS', help='time for a request body to arrive '
                   'after its head (default %g)' % d.body_timeout)
    p.add_argument('--keepalive-timeout', type=float,
                   default=d.keepalive_timeout, metavar='SECONDS',
                   help='close a connection idle this long (default %g)'
                   % d.keepalive_timeout)
    p.add_argument('--max-connections', type=int, default=d.max_connections,
                   metavar='N', help='open connections at most (default %d, '
                   'less if the open-files limit is lower)' % d.max_connections)
    p.add_argument('--proxy', dest='proxies', type=addresses, default=d.proxies,
                   metavar='ADDR,…', help='front servers (e.g. 127.0.0.1 for '
                   'nginx on this host) whose X-Forwarded-For names the '
                   'visitor, for the per-IP limits and the visit records; '
                   'their visitors count as remote (limits on by default)')
    options.add_delay(p)
    for what, text in (('sessions', 'new sessions per client IP address'),
                       ('votes', 'votes per client IP address'),
                       ('ballots', 'ballot pairs (GET / and each vote) per '
                        'client IP address and per session')):
        p.add_argument('--limit-' + what, metavar='N/s|N/m|N/h',
                       help='%s, 0: no limit (default %s on a non-loopback '
                       '--host, else 0)' % (text, settings.REMOTE_LIMITS[what]))


def check_replicas(p, args):
    """Exit with a message for replica options that cannot be served."""
    if not 0 < args.replica_lag <= 60:
        p.error('--replica-lag must be above 0 and at most 60 seconds')
    for db in table.REPLICATED:
        kind = db.name
        if getattr(args, kind + '_replicas') and getattr(args, kind) is None:
            p.error('--%s-replica needs --%s, the primary it replicates'
                    % (kind, kind))
    engine = engines.BY_NAME.get(args.engine or '')
    if engine is None or not args.replicas:
        return
    db = table.of(engine)
    kind = db.name
    if not db.replicas:
        p.error('--replicas: %s engines have no replicas here; run one of %s'
                % (kind.capitalize(),
                   ', '.join(d.name for d in table.REPLICATED)))
    if getattr(args, kind) is not None:
        p.error('--replicas starts replicas of the local %s; for the one '
                'given, give its replicas with --%s-replica'
                % (kind, kind))


def check_front(p, args):
    """Exit with a message for an engine that holds hostile clients without
    limit (frameworks' needs_front), asked to listen beyond the loopback
    with no front server named."""
    engine = engines.BY_NAME.get(args.engine or '')
    if (engine is None or args.proxies or on_loopback(args.host)
            or not frameworks.BY_NAME[engine.framework].needs_front):
        return
    p.error('--host %s: %s engines have no client timeouts, connection cap '
            'or body limit before reading (docs/robyn.md); serve them on the '
            'loopback, or behind a front server that holds those limits, '
            'named with --proxy ADDR (docs/deploy.md)'
            % (args.host, engine.framework.capitalize()))


OPTIONS = (('host', 'port', 'redis_fsync', 'replicas', 'replica_lag', 'packs',
            'header_timeout', 'body_timeout', 'keepalive_timeout',
            'max_connections', 'limit_sessions', 'limit_votes',
            'limit_ballots', 'workers', 'delay', 'proxies', 'tarantool_engine',
            'forget_visitors', 'snapshots_at_start')
           + tuple(db.name for db in table.TABLE)
           + tuple(db.name + '_replicas' for db in table.REPLICATED))


def build_settings(p, args):
    """The one Settings of this process: the options over the defaults,
    with the ports the environment moves; exits on a bad value."""
    from pages.limits import parse_rate
    for name in ('header_timeout', 'body_timeout', 'keepalive_timeout'):
        if not 0 < getattr(args, name) <= 3600:
            p.error('--%s must be above 0 and at most 3600'
                    % name.replace('_', '-'))
    if args.max_connections < 1:
        p.error('--max-connections must be at least 1')
    try:
        s = settings.from_environment()
    except ValueError as e:
        p.error(str(e))
    # No --data: the settings' own dump, if they have one.
    s = settings.replace(s, dump=args.data or s.dump,
                         reuse_port=args.workers > 1, **{
        name: tuple(value) if isinstance(value, list) else value
        for name, value in ((n, getattr(args, n)) for n in OPTIONS)})
    for what in ('sessions', 'votes', 'ballots'):
        try:
            parse_rate(s.limit(what))
        except ValueError as e:
            p.error('--limit-%s: %s' % (what, e))
    return s


def with_session_key(s):
    """s with the key that signs session cookies: the one kept in
    var/session.key, made (random, mode 0600) at the first start, so every
    worker and a restart accept the same cookies. ValueError if unusable."""
    from runtime.databases.files import secret
    from pages.sessions import usable_key
    key = secret(s.session_key_file, create=True)
    try:
        usable_key(key)
    except ValueError as e:
        raise ValueError('%s: %s (remove it to make a new one)'
                         % (s.session_key_file, e))
    return settings.replace(s, session_key=key)


def find_engine(name, argv):
    """The engine; re-executes this command in the legacy environment when
    the engine runs only there."""
    engine = engines.BY_NAME.get(name)
    if engine is None:
        print('unknown engine %r; did you mean %r?\n\n%s'
              % (name, engines.closest(name), engines.listing()),
              file=sys.stderr)
        sys.exit(2)
    why = engines.unavailable(engine)
    if why:
        python = engines.legacy_python(engine)
        if python:
            sys.stdout.flush()
            sys.stderr.flush()
            os.execv(python, [python, os.path.abspath(__file__)] + list(argv))
        print('engine %s cannot run here: %s' % (name, why), file=sys.stderr)
        sys.exit(1)
    return engine


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.list:
        print(engines.listing())
        return 0
    engine = find_engine(args.engine, argv)
    from runtime import serve
    adapter = frameworks.adapter(engine.framework)
    who = '' if args.worker is None else 'worker %d ' % args.worker
    logging.basicConfig(level=args.level, format='%(asctime)s %(levelname)s '
                        + who + '%(name)s: %(message)s')
    # Their per-connection and per-retry lines would flood the log ('multi'
    # engines, outages); pages.outage reports an outage in a few lines.
    for driver in ('asynctnt', 'asyncpg'):
        logging.getLogger(driver).setLevel(
            max(logging.ERROR, logging.getLevelName(args.level)))
    if args.worker is not None:
        from runtime import workers
        from pages.sessions import usable_key
        try:
            worker = workers.read_config()
            usable_key(worker['session_key'])
            job = serve.serve(adapter, engine, settings.replace(
                args.settings, session_key=worker['session_key']), worker)
        except (RuntimeError, ValueError, KeyError, TypeError) as e:
            log.error('bad settings from the parent: %s', e)
            return 1
    else:
        try:
            s = with_session_key(args.settings)
        except (OSError, ValueError) as e:
            log.error('session key: %s', e)
            return 1
        job = (serve.serve_workers(engine, s, argv) if args.workers > 1
               else serve.serve(adapter, engine, s))
    from runtime.databases import Stopped
    loop = engines.new_loop(engine.loop)
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(job)
    except Stopped:
        log.info('stopped while starting')
    except (RuntimeError, OSError, DataUnavailable) as e:
        log.error('%s', e)
        return 1
    finally:
        loop.close()
    return 0


if __name__ == '__main__':
    sys.exit(main())
