"""What floods do to a normal visitor, measured on one engine.

    python -m bench.floods --engine ENGINE [--slow 3000] [--seconds 10]
                           [--linger 15] [--packs N]

Starts its own database and the engine on it (as bench.soak does), then, one
scenario after the other, measures a normal visitor (wrk, 4 connections,
GET /good) alone and during:
  slow     --slow connections that send half a request head and then nothing
           (and how many of them the server closed within --linger seconds);
  stickers 200 connections hammering /stickers.
Prints one table; nothing here judges: read it next to docs/reliability.md.
"""
import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

from runtime import engines, options
from bench.soak import Database, start_site
from runtime.settings import ROOT


def wrk(url, path, connections, seconds):
    """req/s, p99 ms, errors of a wrk run (blocking)."""
    done = subprocess.run(
        ['wrk', '-c%d' % connections, '-t1', '-d%ds' % seconds, '--timeout',
         '5s', '-s', os.path.join(ROOT, 'wrk_scripts', 'get.lua'), url],
        env=dict(os.environ, WRK_PATH=path), capture_output=True, text=True)
    r = json.loads(done.stdout.strip().splitlines()[-1])
    e = r['socket_errors']
    return (r['requests_per_sec'], r['latency_ms'].get('p99'),
            e['connect'] + e['read'] + e['write'] + e['timeout'] + r['non2xx'])


async def slow_clients(port, count):
    """Open `count` connections that each send half a head; returns them."""
    opened = []
    for _ in range(count):
        try:
            reader, writer = await asyncio.open_connection('127.0.0.1', port)
        except OSError:
            break
        writer.write(b'GET /good HTTP/1.1\r\nHost: slow\r\n')
        opened.append((reader, writer))
    return opened


async def closed_by_server(opened):
    closed = 0
    for reader, writer in opened:
        if reader.at_eof() or writer.transport.is_closing():
            closed += 1
            continue
        try:
            if await asyncio.wait_for(reader.read(1), 0.001) == b'':
                closed += 1
        except (asyncio.TimeoutError, ConnectionError):
            pass
    return closed


def scenario_slow(url, port, count, seconds, linger):
    async def run():
        opened = await slow_clients(port, count)
        started = time.monotonic()
        loop = asyncio.get_event_loop()
        measured = await loop.run_in_executor(None, wrk, url, '/good', 4, seconds)
        await asyncio.sleep(max(0, linger - (time.monotonic() - started)))
        closed = await closed_by_server(opened)
        for _, writer in opened:
            writer.close()
        return measured, len(opened), closed
    return asyncio.run(run())


def scenario_flood(url, seconds):
    flood = subprocess.Popen(
        ['wrk', '-c200', '-t1', '-d%ds' % (seconds + 2), '--timeout', '5s',
         '-s', os.path.join(ROOT, 'wrk_scripts', 'get.lua'), url],
        env=dict(os.environ, WRK_PATH='/stickers'), stdout=subprocess.PIPE,
        text=True)
    time.sleep(1)
    measured = wrk(url, '/good', 4, seconds)
    out = flood.communicate()[0].strip().splitlines()[-1]
    return measured, json.loads(out)['requests_per_sec']


def main(argv=None):
    p = argparse.ArgumentParser(prog='bench.floods', description=__doc__.split('\n')[0])
    p.add_argument('--engine', required=True)
    p.add_argument('--slow', type=options.COUNT, default=3000, metavar='N',
                   help='slow connections (default 3000)')
    options.add_duration(p, 10, 'of each measure', flag='--seconds')
    p.add_argument('--linger', type=options.SECONDS, default=15,
                   metavar='SECONDS',
                   help='seconds after opening the slow connections to count '
                        'those the server closed (default 15)')
    options.add_packs(p)
    args = p.parse_args(argv)
    if args.engine not in engines.BY_NAME:
        p.error('unknown engine %r' % args.engine)
    engine = engines.BY_NAME[args.engine]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    directory = tempfile.mkdtemp(prefix='stickers-floods-')
    os.chmod(directory, 0o755)
    db = Database(engines.database(engine), os.path.join(directory, 'db'),
                  900, 1000000, args.packs)
    try:
        server = start_site(engine, db, args.packs,
                            os.path.join(directory, 'server.log'))
    except SystemExit:
        db.stop()
        raise
    url, port = server.url, server.port
    try:
        rows = [('alone', wrk(url, '/good', 4, args.seconds), '')]
        measured, opened, closed = scenario_slow(url, port, args.slow,
                                                 args.seconds, args.linger)
        rows.append(('%d slow connections' % opened, measured,
                     '%d closed by the server within %d s'
                     % (closed, max(args.seconds, args.linger))))
        measured, flood_rate = scenario_flood(url, args.seconds)
        rows.append(('200 connections on /stickers', measured,
                     '/stickers answered %.0f req/s' % flood_rate))
        alive = server.alive()
    finally:
        server.stop(20)
        db.stop()
    print('%s, a visitor on /good with 4 connections:' % engine.name)
    print('| during | /good req/s | p99 ms | errors | notes |')
    print('|---|---:|---:|---:|---|')
    for name, (rate, p99, errors), note in rows:
        print('| %s | %.0f | %s | %d | %s |' % (name, rate, p99, errors, note))
    print('server still running at the end: %s' % ('yes' if alive else 'NO'))
    return 0 if alive else 1


if __name__ == '__main__':
    sys.exit(main())
