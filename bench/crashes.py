"""How long a database crash keeps the site down, measured on one engine.

    python -m bench.crashes --engine ENGINE [--crashes 3] [--every 5] [--packs N]

Runs the engine the way a user does, with the database it starts itself (in
this checkout's var/, on free ports through STICKERS_TARANTOOL_PORT,
STICKERS_POSTGRES_PORT and STICKERS_REDIS_PORT), polls GET /good, and --crashes times kills the
database with SIGKILL: for each, how long until /good answers 200 again and
how many 503s it got meanwhile. Then SIGTERM, and the server's exit status
and its log lines about the databases. Run it while no other server of this
checkout runs: it uses the same var/ data.
"""
import argparse
import glob
import os
import signal
import sys
import time
import urllib.error
import urllib.request

from runtime import engines, options
from runtime.databases import table
from runtime.processes import free_port
from bench.engine import EngineServer, own_ports
from runtime.settings import DEFAULTS


def status(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return answer.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def database_pid(kind):
    """The managed database's pid, from its pid file under var/ (or where
    the local PostgreSQL cluster lives when var/ is out of its reach)."""
    for p in table.BY_NAME[kind].pid_paths(DEFAULTS):
        for path in glob.glob(p):
            with open(path) as f:
                return int(f.readline())
    raise SystemExit('no pid file of the local %s' % kind)


def main(argv=None):
    p = argparse.ArgumentParser(prog='bench.crashes', description=__doc__.split('\n')[0])
    p.add_argument('--engine', required=True)
    p.add_argument('--crashes', type=options.COUNT, default=3, metavar='N',
                   help='database kills (default 3)')
    p.add_argument('--every', type=options.INTERVAL, default=5.0,
                   metavar='SECONDS',
                   help='seconds of service between crashes (default 5)')
    options.add_packs(p)
    args = p.parse_args(argv)
    if args.engine not in engines.BY_NAME:
        p.error('unknown engine %r' % args.engine)
    kind = engines.database(engines.BY_NAME[args.engine])
    env = own_ports()
    log_path = os.path.join(DEFAULTS.var, 'crashes-%s.log' % args.engine)
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    if os.path.exists(log_path):
        os.remove(log_path)
    server = EngineServer(args.engine, free_port(),
                          ['--packs', str(args.packs)], log_path, env=env)
    url = server.url + '/good'
    try:
        server.start(300, ready=lambda: status(url) == 200)
    except RuntimeError:
        raise SystemExit('the server did not start; see %s' % log_path)
    try:
        for n in range(1, args.crashes + 1):
            time.sleep(args.every)
            os.kill(database_pid(kind), signal.SIGKILL)
            killed, unavailable = time.monotonic(), 0
            while True:
                answer = status(url)
                if answer == 200:
                    break
                if answer not in (503, None):
                    print('crash %d: an answer %s' % (n, answer))
                unavailable += answer == 503
                time.sleep(0.02)
            print('crash %d (SIGKILL): /good answers 200 again after %.2f s; '
                  '%d answers 503 meanwhile' % (
                      n, time.monotonic() - killed, unavailable), flush=True)
    finally:
        code = server.stop(60)
    print('SIGTERM: exit status %s' % code)
    with open(log_path, errors='replace') as f:
        told = [line.rstrip() for line in f
                if ' databases: ' in line or ' pages: ' in line]
    print('its log about the databases (%d lines):' % len(told))
    for line in told:
        print('  ' + line)
    return 0 if code == 0 else 1


if __name__ == '__main__':
    sys.exit(main())
