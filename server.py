"""Serve the sticker site with one engine.

    python server.py -e ENGINE [-p PORT] [-l LEVEL] [--tarantool HOST:PORT]
                     [--postgres postgresql://USER:PASS@HOST:PORT/DB]
    python server.py --list

Engines of the legacy stack (japronto, aiotarantool) need CPython 3.7: from
any other interpreter the command runs itself again in .venv37.
"""
import argparse
import asyncio
import importlib
import logging
import os
import signal
import sys

import engines
from data_interface import DataUnavailable

LEVELS = ('DEBUG', 'INFO', 'WARNING', 'ERROR', 'CRITICAL')
log = logging.getLogger('server')


def parse_args(argv):
    from data_interface.address import parse_postgres, parse_tarantool
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('-e', '--engine', help='engine name (see --list)')
    p.add_argument('-p', '--port', type=int, default=1717)
    p.add_argument('-l', '--level', default='INFO', type=str.upper,
                   choices=LEVELS, help='log level (default INFO)')
    p.add_argument('--host', default='127.0.0.1')
    p.add_argument('--list', action='store_true',
                   help='list every engine and whether it runs here')

    def tarantool(text):
        try:
            return parse_tarantool(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e))
    p.add_argument('--tarantool', type=tarantool, metavar='[USER:PASS@]HOST:PORT',
                   help='use this Tarantool (running data_interface/tarantool/'
                        'app.lua) instead of a local one under var/')

    def postgres(text):
        try:
            return parse_postgres(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e))
    p.add_argument('--postgres', type=postgres,
                   metavar='postgresql://USER:PASS@HOST:PORT/DB',
                   help='use this PostgreSQL database (the schema is applied '
                        'at start) instead of a local cluster under var/')
    p.add_argument('--packs', type=int, default=300,
                   help='packs in the generated data set (default 300)')
    p.add_argument('--data', metavar='DUMP.json',
                   help='load this sticker dump (see dataset/dump.py) instead '
                        'of the generated data set into an empty database')
    args = p.parse_args(argv)
    if not args.list and not args.engine:
        p.error('an engine is required: -e ENGINE (see --list)')
    if not 0 < args.port < 65536:
        p.error('port must be 1..65535')
    if not 2 <= args.packs <= 5000:
        p.error('--packs must be 2..5000')
    if args.data:
        import dataset
        try:
            dataset.read_dump(args.data)
        except (OSError, dataset.DumpError) as e:
            p.error(str(e))
    return args


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


async def serve(engine, args):
    from databases import Databases
    from pages import Site
    adapter = importlib.import_module(engine.framework + '_server')
    databases = Databases(tarantool=args.tarantool, packs=args.packs,
                          dump=args.data, postgres=args.postgres)
    try:
        site = Site(await databases.open(engine))
        databases.watch()
        await site.start()
        stopped = asyncio.Event()
        loop = asyncio.get_event_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stopped.set)
        log.info('serving %s on http://%s:%d/ (Python %s)', engine.name,
                 args.host, args.port, sys.version.split()[0])
        try:
            await adapter.serve(site, args.host, args.port, stopped)
        finally:
            await site.stop()
        log.info('stopped')
    finally:
        await databases.close()


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
    logging.basicConfig(level=args.level,
                        format='%(asctime)s %(levelname)s %(name)s: %(message)s')
    # Its per-connection messages would flood the log of 'multi' engines.
    logging.getLogger('asynctnt').setLevel(
        max(logging.WARNING, logging.getLevelName(args.level)))
    loop = new_loop(engine)
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(serve(engine, args))
    except (RuntimeError, OSError, DataUnavailable) as e:
        log.error('%s', e)
        return 1
    finally:
        loop.close()
    return 0


if __name__ == '__main__':
    sys.exit(main())
