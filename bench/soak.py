"""Soak one engine: pages and votes without end, memory sampled as it runs.

    python -m bench.soak --engine ENGINE [--minutes 10] [--every 5]
                         [--warmup SECONDS] [--packs N]

Starts its own database (Tarantool or PostgreSQL, in a temporary directory;
Tarantool with at most --cap sessions and ballots, reached within the
warm-up whatever the request rate, so that what it holds stops changing), the
engine on it, and two wrk loads beside it: every page in turn without cookies
(wrk_scripts/mix.lua) and real votes (wrk_scripts/vote.lua). Every --every
seconds it prints the RSS of the server and of the database (PostgreSQL: the
private memory of the postmaster and all its children, and apart from it the
shared buffers they have touched, which fill up to shared_buffers and no
further) with the site's counters. After
the warm-up it compares the first and the second half of the samples: exit
status 1 when either process grew by more than --tolerance.
"""
import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import dataset
from runtime import engines, options
from runtime.databases import managed, table
from runtime.processes import children, free_port, terminate
from . import memory
from .engine import EngineServer
from runtime.settings import DEFAULTS, ROOT, replace

MIB = 1024 * 1024
STAT = re.compile(r'id="stat-(\w+)">([\d,]+)<')


def rss(pid):
    """Bytes (0 if gone)."""
    return (memory.rss_kib(pid) or 0) * 1024


def private_tree(pid):
    """Private memory of a process and its children, and the most shared
    memory one of them has touched (PostgreSQL's shared buffers: a fixed
    segment, filling up to shared_buffers as the tables are read)."""
    tree = [pid] + children(pid)
    return (sum((memory.status_kib(p, 'RssAnon') or 0) * 1024 for p in tree),
            max((memory.status_kib(p, 'RssShmem') or 0) * 1024 for p in tree))


def site_counters(url):
    try:
        with urllib.request.urlopen(url + '/about', timeout=5) as answer:
            page = answer.read().decode('utf-8')
    except OSError:
        return {}
    return {k: int(v.replace(',', '')) for k, v in STAT.findall(page)}


class Database:
    """The soak's own database: address argument for server.py, memory()."""

    def __init__(self, kind, directory, session_ttl, cap, packs):
        self.kind = table.BY_NAME[kind]
        self.limits = session_ttl, cap, cap
        self.server = managed(kind, directory, free_port(), replace(
            DEFAULTS, session_ttl=session_ttl, max_sessions=cap,
            max_ballots=cap))
        self.server.start()
        asyncio.run(self.load(dataset.generate(packs=packs)))

    async def load(self, data_set):
        loader = self.kind.loader(self.server)
        await self.kind.configure(self.kind.loader(self.server), *self.limits)
        await loader.start()
        try:
            await loader.load(data_set)
        finally:
            await loader.close()

    def environment(self):
        """server.py's address of it, in its environment (the passwords off
        the command line)."""
        return {self.kind.environment: self.kind.url(
            self.kind.site_address(self.server))}

    def memory(self):
        """(memory that could grow without bound, shared buffers or 0)."""
        if not self.kind.forks:
            return rss(self.server.process.pid), 0
        try:
            with open(self.server.pid_path) as f:
                return private_tree(int(f.readline()))
        except (OSError, ValueError):
            return 0, 0

    def stop(self):
        self.server.stop()


def start_site(engine, db, packs, log_path):
    """server.py serving the engine on db (a started EngineServer), once
    /about answers; SystemExit if it does not start."""
    server = EngineServer(engine.name, free_port(),
                          ['--packs', str(packs), '-l', 'WARNING'], log_path,
                          env=db.environment())
    try:
        return server.start(120, ready=lambda: site_counters(server.url))
    except RuntimeError:
        raise SystemExit('the server did not start; see %s' % log_path)


def growth(samples, key, warmup):
    """(first half max, second half max) of a key after the warm-up."""
    steady = [s[key] for s in samples if s['t'] >= warmup]
    half = len(steady) // 2
    if half < 2:
        return None
    return max(steady[:half]), max(steady[half:])


def verdict(first, second, tolerance):
    return second <= first * (1 + tolerance) + 2 * MIB


def parse_args(argv):
    p = argparse.ArgumentParser(prog='bench.soak', description=__doc__.split('\n')[0])
    p.add_argument('--engine', required=True)
    p.add_argument('--minutes', type=options.MINUTES, default=10.0,
                   metavar='MINUTES', help='minutes of load (default 10)')
    p.add_argument('--every', type=options.INTERVAL, default=5.0,
                   metavar='SECONDS', help='seconds between samples (default 5)')
    options.add_warmup(p, None, 'before growth counts', shown='a third of '
                       'the run')
    p.add_argument('--session-ttl', type=int, default=900, metavar='SECONDS',
                   help="Tarantool's session TTL during the soak (default 900)")
    p.add_argument('--cap', type=int, default=20000, metavar='N',
                   help="Tarantool's session and ballot caps during the soak "
                        '(default 20000): full within the warm-up at any rate, '
                        'so what the database holds stops changing')
    p.add_argument('--connections', type=options.COUNT, default=50,
                   metavar='N')
    p.add_argument('--tolerance', type=float, default=0.05,
                   help='allowed growth, second half over first (default 0.05,'
                        ' plus 2 MiB)')
    options.add_packs(p)
    p.add_argument('--out', metavar='FILE.json', help='write the samples here')
    args = p.parse_args(argv)
    if args.engine not in engines.BY_NAME:
        p.error('unknown engine %r (see server.py --list)' % args.engine)
    return args


def wrk(url, script, connections, seconds, log):
    return subprocess.Popen(
        ['wrk', '-c%d' % connections, '-t1', '-d%ds' % seconds,
         '--timeout', '5s', '-s', os.path.join(ROOT, 'wrk_scripts', script), url],
        stdout=subprocess.PIPE, stderr=log, text=True)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    engine = engines.BY_NAME[args.engine]
    seconds = int(args.minutes * 60)
    warmup = args.warmup if args.warmup is not None else seconds / 3
    directory = tempfile.mkdtemp(prefix='stickers-soak-')
    os.chmod(directory, 0o755)      # the postgres user works in it
    log = open(os.path.join(directory, 'soak.log'), 'wb')
    db = server = None
    loads = []
    samples = []
    try:
        db = Database(engines.database(engine), os.path.join(directory, 'db'),
                      args.session_ttl, args.cap, args.packs)
        server = start_site(engine, db, args.packs,
                            os.path.join(directory, 'server.log'))
        url = server.url
        print('soak of %s for %g min: samples every %.0f s, growth counted '
              'after %.0f s; logs in %s' % (engine.name, args.minutes,
                                            args.every, warmup, directory),
              flush=True)
        pages = max(1, args.connections * 4 // 5)
        loads = [wrk(url, 'mix.lua', pages, seconds, log),
                 wrk(url, 'vote.lua', args.connections - pages or 1, seconds, log)]
        start = time.monotonic()
        print('%7s %11s %11s %11s %11s %9s %9s' % (
            't (s)', 'server MiB', 'db MiB', 'shared MiB', 'views', 'votes',
            'sessions'), flush=True)
        while time.monotonic() - start < seconds:
            time.sleep(min(args.every, max(0, seconds - (time.monotonic() - start))))
            if not server.alive():
                raise SystemExit('the server exited with %s; see %s'
                                 % (server.process.returncode,
                                    server.log_path))
            counters = site_counters(url)
            private, shared = db.memory()
            sample = {'t': round(time.monotonic() - start, 1),
                      'server': rss(server.process.pid), 'db': private,
                      'db_shared': shared,
                      'views': counters.get('views'),
                      'votes': counters.get('votes'),
                      'sessions': counters.get('sessions')}
            samples.append(sample)
            print('%7.0f %11.1f %11.1f %11.1f %11s %9s %9s' % (
                sample['t'], sample['server'] / MIB, sample['db'] / MIB,
                sample['db_shared'] / MIB,
                sample['views'], sample['votes'], sample['sessions']), flush=True)
        results = [json.loads(w.communicate(timeout=60)[0].strip().splitlines()[-1])
                   for w in loads]
    except KeyboardInterrupt:
        print('interrupted', file=sys.stderr)
        results = []
    finally:
        for w in loads:
            terminate(w, 5)
        if server is not None:
            server.stop(20)
        if db is not None:
            db.stop()
        log.close()
    return report(args, samples, results, warmup, directory)


def report(args, samples, results, warmup, directory):
    for r in results:
        print('wrk %s: %d requests, %.0f req/s, %d non-2xx%s' % (
            r['script'], r['requests'], r['requests_per_sec'], r['non2xx'],
            ', %d votes counted' % r['votes'] if 'votes' in r else ''))
    ok = True
    for key, name in (('server', 'server'), ('db', 'database')):
        halves = growth(samples, key, warmup)
        if halves is None:
            print('%s: too few samples after the warm-up to judge' % name)
            ok = False
            continue
        good = verdict(halves[0], halves[1], args.tolerance)
        ok = ok and good
        print('%s: peak %.1f MiB in the first half after warm-up, %.1f MiB in '
              'the second: %s' % (name, halves[0] / MIB, halves[1] / MIB,
                                  'flat' if good else 'GROWING'))
    if args.out:
        with open(args.out, 'w') as f:
            json.dump({'engine': args.engine, 'minutes': args.minutes,
                       'samples': samples, 'wrk': results}, f, indent=1)
    if ok:
        shutil.rmtree(directory, ignore_errors=True)
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
