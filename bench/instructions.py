"""Instructions per request: server.py under valgrind's callgrind, counting
the instructions its process runs; a figure that does not move with the
machine's load, where timings on a shared VM move by 1-14 %.

One server per engine, counted only from after its start (the start polls
its database on a clock, so its count varies by some 2 %). Per page: a
warm-up, then a window of N1 requests and one of N2, each ended by a dump:

    per request = (count of the N2 window - count of the N1 window) / (N2 - N1)

so what a window costs besides its requests cancels; three such pairs, and
the median of their three figures is the count. The databases run
natively, not counted. docs/benchmark.md has the whole story.

    python -m bench.instructions --check [--baseline FILE] [--update]
    python bench.py --instructions [--engines A,B] [--pages P,Q] [--requests N1,N2]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from .engine import EngineServer, own_ports, tail
from .keepalive import Closed, Connection
from .wrk import path as page_path
from runtime.processes import free_port
from runtime.settings import REFRESH_ENVIRONMENT, ROOT

N1, N2 = 50, 250
PAIRS = 3                   # per page: the median of this many estimates
WARMUP = 20                 # requests of each page before the counted ones
PAGES = ('ugly', 'good', 'index')
CHECK_ENGINES = ('aiohttp-tarantool-one-uvloop', 'granian-tarantool-one-uvloop',
                 'uvicorn-tarantool-one-uvloop')
BASELINE = os.path.join(ROOT, 'bench', 'instructions-baseline.json')
THRESHOLD = 3.0             # % rise the check fails on
NOISE = 2.0                 # % band of compare: two runs of a build differ by < 2 %
# What every answer must hold (status 200 too). The vote page is left out:
# each vote changes the data the next request reads.
MARKERS = {'ugly': b'UGLY', 'good': b'<article class="card"',
           'bad': b'<article class="card"', 'about': b'id="stat-packs"',
           'pack': b'<article class="card"', 'sticker': b'No. ',
           'index': b'name="win"'}
MISSING = ('valgrind is not installed: apt-get install valgrind '
           '(./run.sh setup installs it)')


class RequestFailed(Exception):
    pass


def valgrind():
    return shutil.which('valgrind')


def version():
    return subprocess.run([valgrind(), '--version'], capture_output=True,
                          text=True).stdout.strip()


def send(conn, page, path, times):
    for _ in range(times):
        status, _, body = conn.get(path)
        if status != 200 or MARKERS[page] not in body:
            raise RequestFailed('%s: HTTP %d, %r' % (path, status, body[:80]))


def requests(port, paths, counts, warmup):
    """A session first (its cookie goes with every later request, so each
    takes the same path), every page's warm-up, then the counted ones."""
    conn = Connection(port)
    try:
        send(conn, 'good', '/good', 1)
        for page, path in paths.items():
            send(conn, page, path, warmup)
        for page, path in paths.items():
            send(conn, page, path, counts[page])
    finally:
        conn.close()


def dumped(path):
    """{object: instructions} of a callgrind dump: each function's own
    cost (not what it calls) summed by the object file it is in."""
    objects, by_object, current, skip = {}, {}, '?', False
    total = None
    with open(path) as f:
        for line in f:
            if line.startswith('summary:'):
                total = int(line.split()[1])
            elif line.startswith(('ob=', 'cob=')):
                found = name(line.split('=', 1)[1].strip(), objects)
                if line.startswith('ob='):
                    current = found
            elif line.startswith('calls='):
                skip = True     # the next cost line is the call's, inclusive
            elif line[:1].isdigit() or line[:1] in '+-*':
                if not skip:
                    cost = line.split()
                    if len(cost) > 1:
                        by_object[current] = by_object.get(current, 0) + int(cost[1])
                skip = False
    # The total is callgrind's own; what the split misses goes to the rest.
    by_object['?'] = by_object.get('?', 0) + total - sum(by_object.values())
    return by_object


def name(text, names):
    """An object's name of callgrind's compressed form: '(id) name' the
    first time in a file, '(id)' after."""
    if text.startswith('('):
        key, _, rest = text.partition(')')
        if rest.strip():
            names[key] = rest.strip()
        return names.get(key, text)
    return text


def part(path):
    """Where an object file's instructions count: 'interpreter', a
    package (its folder under site-packages) or 'rest'."""
    base = os.path.basename(path)
    if base.startswith(('python', 'libpython')):
        return 'interpreter'
    if '/site-packages/' in path:
        return path.split('/site-packages/', 1)[1].split('/')[0]
    return 'rest'


def split(by_object):
    parts = {}
    for path, n in by_object.items():
        parts[part(path)] = parts.get(part(path), 0) + n
    return parts


def control(pid, *args):
    done = subprocess.run(['callgrind_control'] + list(args) + [str(pid)],
                          capture_output=True, text=True, timeout=120)
    if done.returncode:
        raise RuntimeError('callgrind_control %s: %s' % (
            ' '.join(args), (done.stdout + done.stderr).strip()[-400:]))


def environment():
    """Fixed: the hash seed; no /about render after the start (one every
    5 s would fall in the longer window more often); the local databases on
    ports of their own."""
    return dict(own_ports(), PYTHONHASHSEED='0',
                **{REFRESH_ENVIRONMENT: '86400'})


def measure(engine, pages, n1=N1, n2=N2, warmup=WARMUP, root=ROOT,
            python=sys.executable, folder=None, say=None, args=()):
    """[{engine, page, path, per_request, n1, n2, runs, parts}] of one
    engine: one server.py under callgrind, counting from after its start;
    per page a warm-up, then PAIRS times a window of N1 requests and one
    of N2, each ended by a dump (which zeroes the count)."""
    folder = folder or tempfile.mkdtemp(prefix='instructions-')
    os.makedirs(folder, exist_ok=True)
    out_file = os.path.join(folder, 'callgrind.%s.out' % engine)
    tool = [valgrind(), '--tool=callgrind', '--instr-atstart=no',
            '--callgrind-out-file=' + out_file]
    log = os.path.join(folder, engine + '.log')
    hello = engine.startswith('hello-')
    if hello:
        server = HelloServer(engine, free_port(), log, tool, python, environment())
    else:
        server = EngineServer(engine, free_port(), args, log, pin=tool,
                              env=environment(), python=python, root=root)
    server.start(timeout=600, frozen=not hello)
    pid, found, dumps = server.process.pid, [], 0
    conn = None
    try:
        paths = {p: page_path(server.url, p) for p in pages}
        conn = Connection(server.port)
        if hello:       # the same request bytes as the site's /ugly gets
            conn.cookie = HELLO_COOKIE
        else:
            send(conn, 'good', '/good', 1)      # the session every request carries
        control(pid, '-i', 'on')
        for page in pages:
            send(conn, page, paths[page], warmup)
            control(pid, '-z')
            windows = []
            for n in (n1, n2) * PAIRS:
                started = time.monotonic()
                send(conn, page, paths[page], n)
                control(pid, '-d')
                dumps += 1
                counts = dumped('%s.%d' % (out_file, dumps))
                windows.append({'requests': n, 'instructions': sum(counts.values()),
                                'seconds': round(time.monotonic() - started, 1),
                                'parts': split(counts)})
            found.append(record(engine, page, paths[page], n1, n2, warmup, windows))
            if say:
                say('%s %s: %s instructions per request' % (
                    engine, page, '{:,}'.format(found[-1]['per_request'])))
    except Closed as err:
        raise RuntimeError(closed(err, log))
    finally:
        if conn is not None:
            conn.close()
        server.stop(timeout=120)
    return found


# A cookie of the site's session shape (uuid.signature), which a hello
# ignores.
HELLO_COOKIE = '00000000-0000-4000-8000-000000000000.' + 'A' * 22


def closed(err, log):
    """Why a server under valgrind closed the connection, from its log."""
    lines = tail(log, 200).splitlines()
    if any('unhandled instruction bytes' in line for line in lines):
        return ('valgrind cannot run it: it stopped the server at a machine '
                'instruction it does not emulate (SIGILL; see %s)' % log)
    return '%s; the end of its log (%s):\n%s' % (err, log,
                                                  '\n'.join(lines[-15:]))


class HelloServer(EngineServer):
    """A bare hello world ('hello-FRAMEWORK[-uvloop]', bench/references.py)
    counted like an engine: it answers /ugly only."""

    def __init__(self, label, port, log_path, pin, python, env):
        framework, _, loop = label[len('hello-'):].partition('-')
        super().__init__(label, port, [], log_path, pin, env=env)
        self.argv = list(pin) + [python, '-m', 'bench.hello', framework,
                                 '-p', str(port)] + (['--uvloop'] if loop else [])


def record(engine, page, path, n1, n2, warmup, windows):
    """Each pair of windows gives an estimate; the median one is the count
    (a garbage collection of the old generation, or a thread of the
    server's that works on a clock, lands in one window now and then)."""
    estimates = []
    for first, second in zip(windows[::2], windows[1::2]):
        names = set(first['parts']) | set(second['parts'])
        estimates.append({k: round((second['parts'].get(k, 0) - first['parts'].get(k, 0))
                                   / float(n2 - n1)) for k in names})
    totals = [sum(e.values()) for e in estimates]
    middle = sorted(range(len(totals)), key=totals.__getitem__)[len(totals) // 2]
    for w in windows:
        del w['parts']
    per = totals[middle]
    return {'engine': engine, 'page': page, 'path': path, 'n1': n1, 'n2': n2,
            'warmup': warmup, 'runs': windows, 'estimates': totals,
            'spread': round(100.0 * (max(totals) - min(totals)) / per, 2) if per else None,
            'per_request': per,
            'parts': {k: v for k, v in sorted(estimates[middle].items(),
                                              key=lambda kv: -kv[1]) if v}}


def section(results):
    """results.md lines of the counts, or []."""
    records = results.get('instructions') or []
    if not records:
        return []
    lines = ['', '## Instructions per request', '',
             'server.py under %s (callgrind, counting after the start), '
             'PYTHONHASHSEED=0: (count of a window of N2 requests - count '
             'of one of N1) / (N2 - N1), over one keep-alive connection, one '
             'request after another. The databases are not counted; waiting '
             'costs no instructions. How to read it: docs/benchmark.md.'
             % results.get('valgrind', 'valgrind'), '']
    from .references import of_engine
    from .tables import table_md
    hellos = {r['engine']: r['per_request'] for r in records
              if r['engine'].startswith('hello-') and 'per_request' in r}

    def bare(r):
        """The bare hello's count ÷ this /ugly's (1.0: no cost beyond it)."""
        hello = r.get('page') == 'ugly' and hellos.get(of_engine(r['engine']))
        return '%.2f' % (hello / float(r['per_request'])) if hello else '–'
    rows = [[r['engine'], r.get('page', '–'), r.get('path', '–'),
             '{:,}'.format(r['per_request']) if 'per_request' in r else
             'failed: ' + r['failed'].replace('|', '/').replace('\n', ' '),
             '%g%%' % r['spread'] if r.get('spread') is not None else '–',
             bare(r), where(r.get('parts') or {}),
             '%s, %s' % (r['n1'], r['n2']) if 'n1' in r else '–']
            for r in records]
    return lines + table_md(['engine', 'page', 'path', 'instructions/request',
                             'spread of 3', 'hello ÷ this', 'where (per request)',
                             'N1, N2'], rows, numeric=False)


def where(parts, shown=5):
    """'interpreter 480,000 · uvloop 17,000 · …' of the largest parts."""
    top = sorted(parts.items(), key=lambda kv: -kv[1])
    text = ' · '.join('%s %s' % (k, '{:,}'.format(v)) for k, v in top[:shown])
    rest = sum(v for _, v in top[shown:])
    return text + (' · others %s' % '{:,}'.format(rest) if len(top) > shown else '')


# --- the regression check ------------------------------------------------

def keyed(records):
    return {'%s %s' % (r['engine'], r['page']): r['per_request']
            for r in records if 'per_request' in r}


def judge(before, after, threshold):
    """(lines, keys that rose): each count against the baseline's."""
    lines, rises = [], []
    for key, now in sorted(after.items()):
        was = before.get(key)
        if was is None:
            lines.append('%s: %s, not in the baseline' % (key, '{:,}'.format(now)))
            continue
        change = 100.0 * (now - was) / was
        rose = change > threshold
        if rose:
            rises.append(key)
        lines.append('%s: before %s, after %s (%+.2f%%)%s' % (
            key, '{:,}'.format(was), '{:,}'.format(now), change,
            '  ROSE above %g%%' % threshold if rose else ''))
    return lines, rises


def check(baseline, update=False, threshold=THRESHOLD, root=ROOT, args=()):
    """Count the baseline's engines and pages; 1 if any count rose above
    the threshold. args: server.py's."""
    with open(baseline) as f:
        saved = json.load(f)
    n1, n2 = saved['n1'], saved['n2']
    started = time.monotonic()

    def count(engines):
        records = []
        with tempfile.TemporaryDirectory(prefix='instructions-') as folder:
            for engine in engines:
                records += measure(engine, saved.get('pages', PAGES), n1, n2,
                                   saved.get('warmup', WARMUP), root=root,
                                   folder=folder, args=args)
        return keyed(records)
    after = count(saved.get('engines', CHECK_ENGINES))
    if not update:
        # An engine with a count that rose is counted again, and the lower
        # counts kept: now and then a count lands 2-3 % high on a build that
        # did not change (+2.45 % seen); a real rise shows both times.
        rose = judge(saved['counts'], after, threshold)[1]
        engines = sorted({key.split(' ')[0] for key in rose})
        if engines:
            print('counted again: %s (%s rose)' % (', '.join(engines),
                                                   ', '.join(rose)))
            for key, n in count(engines).items():
                after[key] = min(after[key], n)
    print('instructions per request (%d s):' % (time.monotonic() - started))
    if update:
        saved['counts'] = after
        with open(baseline, 'w') as f:
            json.dump(saved, f, indent=1, sort_keys=True)
            f.write('\n')
        print('\n'.join('%s: %s' % (k, '{:,}'.format(v)) for k, v in sorted(after.items())))
        print('baseline updated: ' + baseline)
        return 0
    lines, rises = judge(saved['counts'], after, threshold)
    print('\n'.join(lines))
    if rises:
        print('%d count(s) rose more than %g%% (a deliberate rise: %s)' % (
            len(rises), threshold, saved.get('update', 'python -m bench.instructions --check --update')))
        return 1
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(prog='python -m bench.instructions',
                                description='Instructions per request under '
                                'valgrind; --check counts %s × %s and compares '
                                'them with a baseline.' % (
                                    ', '.join(CHECK_ENGINES), ', '.join(PAGES)))
    p.add_argument('--check', action='store_true', required=True,
                   help='count the fixed set and compare with the baseline')
    p.add_argument('--baseline', default=BASELINE, metavar='FILE',
                   help='default bench/instructions-baseline.json')
    p.add_argument('--threshold', type=float, default=THRESHOLD, metavar='PCT',
                   help='a rise above this fails (default %g)' % THRESHOLD)
    p.add_argument('--update', action='store_true',
                   help='write the counts as the new baseline (a deliberate '
                        'change of the work a request does)')
    args = p.parse_args(argv)
    if valgrind() is None:
        print('bench.instructions: ' + MISSING, file=sys.stderr)
        return 2
    try:
        return check(args.baseline, args.update, args.threshold)
    except (RuntimeError, RequestFailed, OSError) as e:
        print('bench.instructions: %s' % e, file=sys.stderr)
        return 1


if __name__ == '__main__':
    sys.exit(main())
