"""The server's own CPU per mix request at a fixed, low rate: server.py's
process tree (its databases left out) read from /proc around loadgen runs
offering the mix (docs/benchmark.md) at `rate` requests/s. The databases'
CPU is not counted, nor is throughput: on a shared machine CPU seconds per
request move far less than requests per second.

    python -m bench.mix_cpu [--engines A,B] [--rate 200] [--duration 15]
                            [--runs 3]
"""
import argparse
import os
import statistics
import sys
import tempfile

from .engine import FORGET, EngineServer
from .latency import mixed
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


def measure(engine, rate, duration, runs, env, say=print):
    """{engine, rate, per_request_us: [each run's], median_us, requests}"""
    folder = tempfile.mkdtemp(prefix='mixcpu-')
    server = EngineServer(engine, free_port(), [FORGET],
                          os.path.join(folder, engine + '.log'), env=env)
    server.start(timeout=600, frozen=True)
    found = []
    try:
        argv = mixed.command(mixed.BINARY, server.url, rate, duration,
                             connections=16, timeout=10)
        mixed.run(mixed.command(mixed.BINARY, server.url, rate, 12, 16, 10),
                  12, rate)     # warm-up: a sweep or two
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
            'median_us': round(statistics.median(found))}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--engines', default=','.join(ENGINES))
    parser.add_argument('--rate', type=float, default=200)
    parser.add_argument('--duration', type=float, default=15)
    parser.add_argument('--runs', type=int, default=3)
    args = parser.parse_args(argv)
    env = {k: os.environ[k] for k in os.environ if k.endswith('_PORT')
           and k.startswith('STICKERS_')}
    rows = [measure(e, args.rate, args.duration, args.runs, env,
                    say=lambda line: print(line, file=sys.stderr))
            for e in args.engines.split(',')]
    for r in rows:
        print('%-36s %6d us per mix request at %g/s (runs: %s)' % (
            r['engine'], r['median_us'], r['rate'],
            ', '.join('%.0f' % x for x in r['per_request_us'])))


if __name__ == '__main__':
    main()
