"""Serve the sticker site with one engine.

    python server.py -e ENGINE [-p PORT] [-l LEVEL] [--workers N]
                     [--tarantool HOST:PORT]
                     [--postgres postgresql://USER:PASS@HOST:PORT/DB]
                     [--header-timeout S] [--body-timeout S]
                     [--keepalive-timeout S] [--max-connections N]
                     [--limit-sessions N/m] [--limit-votes N/m]
                     [--limit-ballots N/m]
    python server.py --list

Engines of the legacy stack (japronto, aiotarantool) need CPython 3.7: from
any other interpreter the command runs itself again in .venv37. With
--workers N, N processes serve the port (see workers.py). The database
addresses, which may hold passwords, may come from the environment instead
(STICKERS_TARANTOOL, STICKERS_POSTGRES) or from a file of arguments, one
per line: python server.py -e ENGINE @FILE.
"""
import argparse
import asyncio
import importlib
import logging
import os
import signal
import sys

from runtime import engines
from runtime import settings
from data_interface import DataUnavailable

LEVELS = ('DEBUG', 'INFO', 'WARNING', 'ERROR', 'CRITICAL')
# Where --tarantool and --postgres may come from instead, off the command
# line that `ps` shows.
ADDRESS_ENVIRONMENT = {'tarantool': 'STICKERS_TARANTOOL',
                       'postgres': 'STICKERS_POSTGRES'}
log = logging.getLogger('server')


def parse_args(argv):
    from data_interface.address import parse_postgres, parse_tarantool
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
    p.add_argument('--workers', type=int, default=d.workers, metavar='N',
                   help='processes serving the port (default %d; see --list '
                        'for the engines that take more)' % d.workers)
    # Given by the parent to the workers it starts (workers.py).
    p.add_argument('--worker', type=int, help=argparse.SUPPRESS)

    def tarantool(text):
        try:
            return parse_tarantool(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e))
    p.add_argument('--tarantool', type=tarantool, metavar='[USER:PASS@]HOST:PORT',
                   help='use this Tarantool (running data_interface/tarantool/'
                        'instance.lua) instead of a local one under var/ '
                        '(default: $STICKERS_TARANTOOL)')

    def postgres(text):
        try:
            return parse_postgres(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e))
    p.add_argument('--postgres', type=postgres,
                   metavar='postgresql://USER:PASS@HOST:PORT/DB',
                   help='use this PostgreSQL database (the schema is applied '
                        'at start) instead of a local cluster under var/ '
                        '(default: $STICKERS_POSTGRES)')
    p.add_argument('--packs', type=int, default=d.packs,
                   help='packs in the generated data set (default %d)'
                   % d.packs)
    p.add_argument('--data', metavar='DUMP.json',
                   help='load this sticker dump (see dataset/dump.py) instead '
                        'of the generated data set into an empty database')
    add_edge_args(p, d)
    args = p.parse_args(argv)
    for name, parse in (('tarantool', tarantool), ('postgres', postgres)):
        given = os.environ.get(ADDRESS_ENVIRONMENT[name])
        if getattr(args, name) is None and given:
            try:
                setattr(args, name, parse(given))
            except argparse.ArgumentTypeError as e:
                p.error('%s: %s' % (ADDRESS_ENVIRONMENT[name], e))
    args.settings = build_settings(p, args)
    if not args.list and not args.engine:
        p.error('an engine is required: -e ENGINE (see --list)')
    if not 0 < args.port < 65536:
        p.error('port must be 1..65535')
    if not 1 <= args.workers <= 256:
        p.error('--workers must be 1..256')
    engine = engines.BY_NAME.get(args.engine)
    if args.workers > 1 and engine and not engines.takes_workers(engine):
        p.error('--workers: %s serves from one process only (its framework '
                'does not bind with SO_REUSEPORT here); the engines of %s '
                'take more' % (engine.name, ', '.join(engines.WORKERS)))
    if not 2 <= args.packs <= 5000:
        p.error('--packs must be 2..5000')
    if args.data:
        import dataset
        try:
            dataset.read_dump(args.data)
        except (OSError, dataset.DumpError) as e:
            p.error(str(e))
    return args


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
    for what, text in (('sessions', 'new sessions per client IP address'),
                       ('votes', 'votes per client IP address'),
                       ('ballots', 'ballot pairs (GET / and each vote) per '
                        'client IP address and per session')):
        p.add_argument('--limit-' + what, metavar='N/s|N/m|N/h',
                       help='%s, 0: no limit (default %s on a non-loopback '
                       '--host, else 0)' % (text, settings.REMOTE_LIMITS[what]))


OPTIONS = ('host', 'port', 'tarantool', 'postgres', 'packs', 'header_timeout',
           'body_timeout', 'keepalive_timeout', 'max_connections',
           'limit_sessions', 'limit_votes', 'limit_ballots', 'workers')


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
    s = settings.replace(s, dump=args.data, reuse_port=args.workers > 1, **{
        name: getattr(args, name) for name in OPTIONS})
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
    from data_interface.address import secret
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


def stop_event():
    """An event set by SIGINT or SIGTERM."""
    stopped = asyncio.Event()
    loop = asyncio.get_event_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopped.set)
    return stopped


async def serve(engine, s, worker=None):
    """Serve from this process; a worker (workers.py) uses the databases
    its parent runs, as told in `worker` (the parent's settings)."""
    from runtime import edge
    from runtime import workers
    from runtime.databases import open_databases
    from pages import Site
    adapter = importlib.import_module(engine.framework + '_server')
    stopped = stop_event()   # before any database starts: none is left
    opened = (workers.given_databases(engine, worker) if worker
              else open_databases(engine, s, stopped))
    async with opened as data:
        site = Site(data, s)
        await site.start()
        if worker:
            workers.watch_parent(stopped)
            ready = asyncio.ensure_future(
                workers.report_ready(worker['ready'], s.port))
        else:
            log.info('serving %s on http://%s:%d/ (Python %s)', engine.name,
                     s.host, s.port, sys.version.split()[0])
        try:
            await adapter.serve(site, s.host, s.port, stopped,
                                edge.limits_of(s))
        finally:
            if worker:
                ready.cancel()
            await site.stop()
        log.info('stopped')


async def serve_workers(engine, s, argv):
    from runtime import workers
    await workers.parent(engine, s, argv, stop_event())
    log.info('stopped')


def new_loop(engine):
    if engine.loop == 'uvloop':
        import uvloop
        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.list:
        print(engines.listing())
        return 0
    engine = find_engine(args.engine, argv)
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
            job = serve(engine, settings.replace(
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
        job = (serve_workers(engine, s, argv) if args.workers > 1
               else serve(engine, s))
    from runtime.databases import Stopped
    loop = new_loop(engine)
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
