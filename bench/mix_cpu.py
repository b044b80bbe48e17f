"""The server's own CPU per mix request at a fixed, low rate: server.py's
process tree (its databases left out) read from /proc around loadgen runs
offering the mix (docs/benchmark.md) at `rate` requests/s. The databases'
CPU is not counted, nor is throughput: on a shared machine CPU seconds per
request move far less than requests per second.

    python -m bench.mix_cpu [--engines A,B] [--rate 200] [--duration 15]
                            [--runs 3] [--rounds 1] [--apart] [--packs N]
                            [--warmup 12]

With --rounds N, every engine is started N times in turn (A, B, A, B...),
`runs` runs each time, so that a host whose speed drifts over minutes
moves each engine alike; each engine's figure is the median of all its
runs, and each one's ratio to the first engine is the median of the
rounds' ratios (a round's figure is the median of its runs).

With --apart, the layout of bench.py --databases-apart: the server alone
on the last core, the load generator and the databases it started on the
first.
"""
import argparse
import os
import statistics
import sys
import tempfile

from . import memory
from .cli import pinning
from .engine import FORGET, EngineServer
from .latency import mixed
from .runner import pin_tree
from runtime.engines import BY_NAME
from runtime.processes import free_port

ENGINES = ('aiohttp-redis-one-uvloop', 'aiohttp-redis-pool-uvloop',
           'aiohttp-rediscluster-pool-uvloop', 'granian-redis-one-uvloop',
           'granian-redis-pool-uvloop', 'granian-rediscluster-pool-uvloop')
# Database processes a server.py starts: their CPU is not the server's.
DATABASES = (b'redis-server', b'tarantool', b'postgres')
TICK = os.sysconf('SC_CLK_TCK')


def tree_cpu(root):
    """CPU seconds (user + system) of `root` and its descendants, the
    database processes among them left out."""
    parents, stats = {}, {}
    for name in os.listdir('/proc'):
        if not name.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % name, 'rb') as f:
                text = f.read()
        except OSError:
            continue
        comm = text[text.index(b'(') + 1:text.rindex(b')')]
        fields = text[text.rindex(b')') + 2:].split()
        parents[int(name)] = int(fields[1])
        stats[int(name)] = (comm, int(fields[11]) + int(fields[12]))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        comm, ticks = stats.get(pid, (b'', 0))
        if not comm.startswith(DATABASES):
            total += ticks
            todo.extend(p for p, parent in parents.items() if parent == pid)
    return total / TICK


def measure(engine, rate, duration, runs, env, say=print, apart=False,
            packs=None, warmup=12):
    """{engine, rate, per_request_us: [each run's], median_us,
    databases_on: the cores its databases ran on with apart, else None}"""
    folder = tempfile.mkdtemp(prefix='mixcpu-')
    pin = pinning(not apart, apart=True)
    if apart and not pin['databases']:
        raise SystemExit('--apart: needs taskset and two cores or more')
    args = [FORGET] + (['--packs', str(packs)] if packs else [])
    server = EngineServer(engine, free_port(), args,
                          os.path.join(folder, engine + '.log'),
                          pin=pin['server'], env=env)
    server.start(timeout=600, frozen=True)
    found, on = [], None
    try:
        if apart:
            on = sorted(set(pin_tree(memory.database_pids(
                BY_NAME[engine], server) or (), pin['databases']).values())
                - {None})
        argv = mixed.command(mixed.BINARY, server.url, rate, duration,
                             connections=16, timeout=10, pin=pin['wrk'])
        if warmup:      # a sweep or two
            mixed.run(mixed.command(mixed.BINARY, server.url, rate, warmup,
                                    16, 10, pin=pin['wrk']), warmup, rate)
        for _ in range(runs):
            before = tree_cpu(server.process.pid)
            record = mixed.run(argv, duration, rate)
            after = tree_cpu(server.process.pid)
            report = record.get('oha') or {}
            requests = report.get('requests', 0)
            failed = report.get('non2xx', 0)
            if not requests:
                raise RuntimeError('%s: no requests: %s' % (
                    engine, record.get('error')))
            found.append((after - before) / requests * 1e6)
            say('%s: %d requests (%d not 2xx), %.0f us each'
                % (engine, requests, failed, found[-1]))
    finally:
        server.stop()
    return {'engine': engine, 'rate': rate, 'per_request_us': found,
            'median_us': round(statistics.median(found)), 'databases_on': on}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--engines', default=','.join(ENGINES))
    parser.add_argument('--rate', type=float, default=200)
    parser.add_argument('--duration', type=float, default=15)
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--rounds', type=int, default=1,
                        help='each engine started this many times, in turn')
    parser.add_argument('--apart', action='store_true',
                        help="bench.py --databases-apart's layout")
    parser.add_argument('--packs', type=int, help="server.py's --packs")
    parser.add_argument('--warmup', type=float, default=12,
                        help='seconds of the mix before the runs')
    args = parser.parse_args(argv)
    if args.runs < 1 or args.rounds < 1:
        parser.error('--runs and --rounds must be at least 1')
    env = {k: os.environ[k] for k in os.environ if k.endswith('_PORT')
           and k.startswith('STICKERS_')}
    engines = args.engines.split(',')
    rounds = [[measure(e, args.rate, args.duration, args.runs, env,
                       say=lambda line: print(line, file=sys.stderr),
                       apart=args.apart, packs=args.packs,
                       warmup=args.warmup)
               for e in engines] for _ in range(args.rounds)]
    for i, r in enumerate(pooled(rounds)):
        print('%-36s %6d us per mix request at %g/s (runs: %s)%s%s' % (
            r['engine'], r['median_us'], r['rate'],
            ', '.join('%.0f' % x for x in r['per_request_us']),
            ' (its databases on CPU %s)' % ','.join(r['databases_on'])
            if r['databases_on'] is not None else '',
            ' (%.2f x %s: rounds %s)' % (
                r['ratio'], engines[0], ', '.join(
                    '%.2f' % x for x in r['ratios'])) if i else ''))


def pooled(rounds):
    """Each engine's row over all rounds (runs pooled), with its ratio to
    the first engine's: the median of the rounds' ratios of medians."""
    rows = []
    for i, first in enumerate(rounds[0]):
        runs = [x for r in rounds for x in r[i]['per_request_us']]
        ratios = [statistics.median(r[i]['per_request_us'])
                  / statistics.median(r[0]['per_request_us'])
                  for r in rounds]
        rows.append(dict(first, per_request_us=runs,
                         median_us=round(statistics.median(runs)),
                         ratios=ratios, ratio=statistics.median(ratios)))
    return rows


if __name__ == '__main__':
    main()
