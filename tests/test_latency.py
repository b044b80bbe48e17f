"""bench.py --latency and bench.py compare: the budget and its search, oha's
report, the latency correction against a real stall, compare on real runs."""
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import ROOT, TEST_PACKS, free_port, tarantool_address
from bench import compare, guesses, html, references
from bench.progress import Progress
from bench.latency import budget, cells, fixed_rate, oha, steady
from plugins.tools import need_oha

SLO = {'percentile': 'p99', 'ms': 10.0}


def report(achieved=1000.0, offered=1000.0, p99=5.0, non2xx=0, **errors):
    return {'achieved': achieved, 'offered': offered, 'non2xx': non2xx,
            'errors': errors, 'latency_ms': {'p50': 1.0, 'p99': p99}}


# --- the budget and its search ----------------------------------------------

@pytest.mark.parametrize('text, expected', [
    ('p99=10ms', {'percentile': 'p99', 'ms': 10.0}),
    ('p99.9<=2s', {'percentile': 'p99.9', 'ms': 2000.0}),
    ('p50=500us', {'percentile': 'p50', 'ms': 0.5}),
    ('max=25ms', {'percentile': 'max', 'ms': 25.0}),
])
def test_budgets_parse(text, expected):
    assert budget.parse(text) == expected


@pytest.mark.parametrize('text', ['p99', 'p98=10ms', 'p99=0ms', 'p99=10',
                                  'p99=ten ms', '', 'p99=1e9ms;rm'])
def test_bad_budgets_say_why(text):
    with pytest.raises(ValueError):
        budget.parse(text)


def test_a_point_keeps_the_budget_only_clean_on_time_and_at_its_rate():
    assert budget.verdict(report(), SLO) is None
    assert budget.verdict(report(p99=10.5), SLO) == 'p99 10.5 ms'
    assert budget.verdict(report(non2xx=1), SLO) == '1 errors'
    assert budget.verdict(report(timeout=2), SLO) == '2 errors'
    assert 'achieved' in budget.verdict(report(achieved=800.0), SLO)
    assert budget.verdict(None, SLO) == 'no report'


def test_the_search_brackets_then_halves():
    points = [(250, True), (500, True), (750, False), (900, False)]
    assert budget.bracket(points) == (500, 750)
    assert budget.next_probe(points, 1000) == 625
    points.append((625, True))
    assert budget.next_probe(points, 1000) == 687.5
    assert budget.capacity(points) == {'rate': 625, 'open': False, 'missed_at': 750}


def test_the_search_goes_above_saturation_while_nothing_misses():
    points = [(250, True), (900, True)]
    assert budget.next_probe(points, 1000) == 1000
    points.append((1000, True))
    assert budget.next_probe(points, 1000) == 1200
    points.append((1200, True))
    assert budget.next_probe(points, 1000) == 1440
    points.append((1440, True))
    assert budget.next_probe(points, 1000) is None     # past 1.5x
    assert budget.capacity(points)['open'] is True


def test_nothing_kept_searches_down_from_zero():
    points = [(250, False), (500, False)]
    assert budget.next_probe(points, 1000) == 125
    assert budget.capacity(points) == {'rate': 0.0, 'open': False, 'missed_at': 250}


def test_a_kept_point_above_a_missed_one_does_not_count():
    assert budget.bracket([(250, False), (500, True)]) == (None, 250)


def test_a_rate_tried_twice_is_missed_only_when_both_missed():
    points = [(250, True), (500, False), (500, True), (750, False), (750, False)]
    assert budget.bracket(points) == (500, 750)
    assert budget.capacity(points)['rate'] == 500
    assert budget.next_probe(points, 1000) == 625


def test_only_a_miss_on_the_percentile_alone_is_tried_again():
    def record(r, vote_ok=True):
        return {'oha': r, 'kept': budget.verdict(r, SLO) is None,
                'vote_check': {'ok': vote_ok, 'reason': 'votes lost'}}
    assert budget.stall_like(record(report(p99=30.0)), SLO)
    assert not budget.stall_like(record(report()), SLO)       # kept
    assert not budget.stall_like(record(report(p99=30.0, non2xx=1)), SLO)
    assert not budget.stall_like(record(report(p99=30.0, achieved=500.0)), SLO)
    assert not budget.stall_like(record(report(p99=30.0), vote_ok=False), SLO)
    assert not budget.stall_like(record(None), SLO)


class Scripted:
    """A search member whose points come from a script of (kept, host
    ran slow, missed on the percentile alone), in place of real runs."""

    def __init__(self, script):
        self.script = list(script)
        self.host, self.credit = {}, 0.0
        self.server = type('Server', (), {'alive': lambda self: True})()

    def point(self, matrix, member, page, run, rate, label, retry=False):
        kept, slow = self.script.pop(0)
        return {'kept': kept, 'host': {'slow': slow}, 'vote_check': {'ok': True},
                'oha': report(p99=5.0 if kept else 30.0)}


STEADY = {'slow_pct': 0.0, 'longest_ms': 0}
UNSTEADY = {'slow_pct': 5.0, 'longest_ms': 90}


@pytest.mark.parametrize('script, tries, floor', [
    ([(True, True)], 1, STEADY),                             # kept
    ([(False, False), (False, False)], 2, STEADY),   # missed twice, host steady
    ([(False, False), (False, True), (False, True)], 3, STEADY),  # slow: a third
    ([(False, True), (False, False)], 2, STEADY),    # the second on a steady host
    ([(False, True), (True, False)], 2, STEADY),     # the second kept
    ([(False, True), (False, True), (False, True)], 3, STEADY),   # up to TRIES
    ([(False, True), (False, True)], 2, UNSTEADY),   # no third on a slow host
    ([(False, True), (False, True), (False, True)], 3, None),     # no floor
])
def test_a_miss_is_tried_again_while_the_host_ran_slow(monkeypatch, script,
                                                       tries, floor):
    member = Scripted(script)
    monkeypatch.setattr(fixed_rate, 'point', member.point)
    matrix = type('Matrix', (), {
        's': type('S', (), {'slo': SLO, 'point_duration': 2}),
        'progress': Progress(100.0, io.StringIO()),
        'results': {'floor': [{'when': 'before', 'core': floor}] if floor else []}})()
    found = fixed_rate.tried(matrix, member, 'good', 1, 500.0, '50%')
    assert [kept for _, kept in found] == [k for k, _ in script[:tries]]
    assert member.host[500.0] == [slow for _, slow in script[:tries]]
    assert member.script == []


class Planned:
    """A member of fixed_rate.turns whose points are all kept or all missed
    on the percentile alone, the host slow."""

    def __init__(self, matrix, name, server, pair, page, mode):
        self.name, self.server, self.pair, self.top = name, server, pair, 1000.0
        self.host, self.credit = {}, 0.0


@pytest.mark.parametrize('kept, confirm', [(True, 0), (False, 0),
                                           (True, 10), (False, 10)])
def test_a_search_counts_on_the_bar_as_planned(monkeypatch, kept, confirm):
    """Every miss tried again (15 points where 7.5 are planned) slows the
    bar's pace instead of filling it early; a search of fewer points counts
    whole: each of 3 searches is a third of the bar. With nothing kept
    there is no capacity to confirm."""
    s = type('S', (), {'slo': SLO, 'point_duration': 2, 'rates': None,
                       'fractions': [0.5, 0.9], 'searches': {}, 'runs': 3,
                       'confirm': confirm})
    plan = 3 * guesses.search_guess(s, 'good')
    shares = []
    matrix = type('Matrix', (), {
        's': s, 'progress': Progress(plan, io.StringIO()), 'last_votes': None,
        'results': {'floor': [{'when': 'before', 'core': STEADY}],
                    'capacity': []},
        'save': lambda self: shares.append(
            self.progress.done / self.progress.planned)})()
    counted = []

    def point(matrix, member, page, run, rate, label, retry=False,
              seconds=None):
        counted.append(retry)
        return {'kept': kept, 'host': {'slow': True}, 'vote_check': {'ok': True},
                'oha': report(p99=5.0 if kept else 30.0)}
    monkeypatch.setattr(fixed_rate, 'Member', Planned)
    monkeypatch.setattr(fixed_rate, 'point', point)
    server = type('Server', (), {'alive': lambda self: True})()
    gone = type('Server', (), {'alive': lambda self: False})()
    # b died before its turn: its searches leave the plan
    matrix.progress.planned *= 2
    assert fixed_rate.turns(matrix, [('a', server, None), ('b', gone, None)],
                            'good', 'plain') == set()
    assert len(counted) == (15 + (3 if confirm else 0) if kept else 45)
    assert shares == pytest.approx([1 / 3, 2 / 3, 1.0])


class Confirming:
    """A member whose points keep the budget at or below `holds`/s; a miss
    just above it is on the percentile alone."""

    def __init__(self, holds, stall_once=False):
        self.name, self.holds, self.tried = 'a', holds, []
        self.stall_once, self.credit = stall_once, 100.0
        self.server = type('Server', (), {'alive': lambda self: True})()

    def point(self, matrix, member, page, run, rate, label, retry=False,
              seconds=None):
        assert (label, seconds) == ('confirm', 10)
        kept = rate <= self.holds
        if self.stall_once and not self.tried:
            kept = False
        self.tried.append(rate)
        return {'kept': kept, 'host': {}, 'vote_check': {'ok': True},
                'oha': report(p99=5.0 if kept else 30.0)}


@pytest.mark.parametrize('holds, stall_once, tried, rate, how', [
    (1000, False, [900], 900, 'held'),
    (1000, True, [900, 900], 900, 'again'),
    # missed twice at 900: down to the search's kept 600, which holds
    (700, False, [900, 900, 600], 600, 'stepped down'),
    # then by STEP_DOWN below the search's lowest kept rate
    (500, False, [900, 900, 600, 600, 480], 480, 'stepped down'),
    (100, False, [900, 900, 600, 600, 480, 480], 0.0, 'not held'),
])
def test_a_capacity_is_confirmed_by_a_longer_run_or_stepped_down(
        monkeypatch, holds, stall_once, tried, rate, how):
    member = Confirming(holds, stall_once)
    monkeypatch.setattr(fixed_rate, 'point', member.point)
    matrix = type('Matrix', (), {
        's': type('S', (), {'slo': SLO, 'confirm': 10}),
        'progress': Progress(100.0, io.StringIO())})()
    points = [(600.0, True), (900.0, True), (1000.0, False)]
    found = fixed_rate.confirm(matrix, member, 'good', 1, points)
    assert member.tried == tried
    assert (found['rate'], found['confirmed'], found['searched']) == (
        rate, how, 900.0)
    assert found['missed_at'] == (1000.0 if how in ('held', 'again')
                                  else min(tried[:-1]) if rate else 480)


def test_a_watch_counts_slow_bursts_and_their_longest_run():
    def bursts(cpus):       # bursts of the CPU ms given, 4 ms apart
        found, t = [], 0.0
        for c in cpus:
            found.append((t, c / 1000.0, t + c / 1000.0))
            t += c / 1000.0 + steady.REST
        return found
    assert steady.summary([]) == {'bursts': 0, 'slow_pct': 0.0, 'longest_ms': 0}
    steady_run = steady.summary(bursts([1.0] * 99 + [1.9]))
    assert steady_run == {'bursts': 100, 'slow_pct': 0.0, 'longest_ms': 0}
    # three slow bursts in a row (12 + 4 + 12 + 4 + 2.1 ms from the first
    # one's start to the last one's end), and one alone
    found = steady.summary(bursts([1.0] * 50 + [12.0, 12.0, 2.1] + [1.0] * 46
                                  + [3.0]))
    assert found == {'bursts': 100, 'slow_pct': 4.0, 'longest_ms': 34}
    slo = {'percentile': 'p99', 'ms': 10.0}
    assert steady.unsteady([found], slo) == [found]
    assert steady.unsteady([found], {'percentile': 'p99', 'ms': 100.0}) == []
    # slow bursts on either side of 400 ms when the watch did not run: two
    # runs, not one across the gap
    gap = bursts([1.0] * 50 + [12.0, 12.0] + [1.0] * 48)
    gap[52:] = [(a + 0.4, c, b + 0.4) for a, c, b in gap[52:]]
    gap[51] = (gap[51][0] + 0.4, gap[51][1], gap[51][2] + 0.4)
    assert steady.summary(gap)['longest_ms'] == 12


BUSY = """
import time
while True:
    end = time.time() + 0.4
    while time.time() < end:
        pass
    time.sleep(0.3)
"""


@pytest.mark.bench
def test_the_host_watch_leaves_out_waits_in_the_guest():
    """A watch beside a process that takes its core for 400 ms at a time
    (as the load generator may) counts no slow stretch that long: it counts
    CPU time, and a gap in which it did not run ends a run of slow bursts.
    A watch that cannot start says why."""
    pin = ['taskset', '-c', str(max(os.sched_getaffinity(0)))]
    busy = subprocess.Popen(pin + [sys.executable, '-c', BUSY])
    try:
        started = steady.watching(pin, 30)
        time.sleep(3.0)
        found = steady.watched(started, SLO)
    finally:
        busy.kill()
        busy.wait()
    # (the host's own slow stretches, at most 110 ms here, may show)
    # (on a loaded machine, many bursts are kept off their core and left out)
    assert found['bursts'] >= 20 and found['longest_ms'] < 300, found
    assert set(found) == {'bursts', 'slow_pct', 'longest_ms', 'slow'}
    failing = steady.watching(['false'], 1)
    failing.wait(10)
    said = steady.watched(failing, SLO)
    assert said == {'error': 'the host watch failed (exit 1): no output'}


# --- oha ---------------------------------------------------------------------

OHA_JSON = {
    'summary': {'successRate': 1.0, 'total': 2.0, 'slowest': 0.5,
                'fastest': 0.0001, 'average': 0.001, 'requestsPerSec': 99.0},
    'latencyPercentiles': {'p50': 0.001, 'p90': 0.002, 'p99': 0.004,
                           'p99.9': 0.2, 'p99.99': 0.5},
    'statusCodeDistribution': {'200': 196, '503': 2},
    'errorDistribution': {'timeout': 1, 'connection closed': 1},
}


def test_oha_report_names_each_latency_by_its_percentile():
    r = oha.parse('some text first\n' + json.dumps(OHA_JSON))
    assert r['latency_ms'] == {'p50': 1.0, 'p90': 2.0, 'p99': 4.0,
                               'p99.9': 200.0, 'max': 500.0}
    assert (r['requests'], r['ok'], r['non2xx'], r['timeouts']) == (198, 196, 2, 1)
    assert r['achieved'] == 99.0


@pytest.mark.parametrize('stdout', ['', 'error: connection refused',
                                    '{"summary": {}}', '{broken'])
def test_bad_oha_output_is_an_error_not_a_crash(stdout):
    with pytest.raises(ValueError):
        oha.parse(stdout)


def test_the_correction_is_on_unless_asked_off():
    on = oha.command('oha', 'http://x/', 300, 5, 10, 2)
    off = oha.command('oha', 'http://x/', 300, 5, 10, 2, correction=False)
    assert '--latency-correction' in on and '--latency-correction' not in off
    assert on[on.index('-q') + 1] == '300'
    pinned = oha.command('oha', 'http://x/', 300, 5, 10, 2, pin=['taskset', '-c', '0'])
    assert pinned[:4] == ['taskset', '-c', '0', 'oha']
    assert oha.cores_of(pinned) == 1 and oha.cores_of(['taskset', '-c', '0-1,3']) == 3


def stalled_run(path, server, correction, rate=300, seconds=4, stall=1.0):
    """oha at a fixed rate over 2 connections while the server is stopped
    (SIGSTOP) for `stall` seconds in the middle."""
    argv = oha.command(path, server.url + '/ugly', rate, seconds, 2, 10,
                       correction=correction)
    result = {}
    run = threading.Thread(target=lambda: result.update(
        record=oha.run(argv, seconds, rate)))
    run.start()
    time.sleep(1.5)
    os.kill(server.process.pid, signal.SIGSTOP)
    time.sleep(stall)
    os.kill(server.process.pid, signal.SIGCONT)
    run.join(60)
    return result['record']['oha']


@pytest.mark.timeout(600)
@pytest.mark.bench
@pytest.mark.server
def test_the_correction_counts_every_request_a_stall_held_up(tmp_path):
    path = need_oha()
    server = references.HelloServer('aiohttp', 'asyncio', free_port(),
                                    str(tmp_path / 'log'), (), sys.executable,
                                    'hello')
    server.start(timeout=60)
    try:
        corrected = stalled_run(path, server, True)
        uncorrected = stalled_run(path, server, False)
    finally:
        server.stop()
    for r in (corrected, uncorrected):      # the same load got through
        assert r['ok'] > 0.8 * 300 * 4 and not r['errors'], r
    # About 300 requests fell due during the second the server slept:
    # counted from when they were due, the slowest 1 % waited most of it.
    assert corrected['latency_ms']['p99'] > 300, corrected
    # Counted from when sent, only the 2 requests in flight saw the stall:
    # their p99 is a small part of the corrected one.
    assert uncorrected['latency_ms']['p99'] * 3 < \
        corrected['latency_ms']['p99'], (uncorrected, corrected)
    assert uncorrected['latency_ms']['max'] > 900, uncorrected


# --- a real latency run, and compare on real runs ------------------------------

def latency_bench(tarantool, out, *options):
    a = tarantool_address(tarantool)
    argv = [sys.executable, 'bench.py', '--latency', '--engines',
            'aiohttp-tarantool-one', '--pages', 'good', '--duration', '1',
            '--warmup', '1', '--runs', '3', '--rates', '200,400',
            '--slo', 'p50=20ms', '--confirm', '2',
            '--tarantool', '%s:%d' % (a.host, a.port),
            '--packs', str(TEST_PACKS), '--port', str(free_port()),
            '--out', str(out)] + list(options)
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


@pytest.fixture(scope='module')
def latency_runs(tarantool, tmp_path_factory):
    need_oha()
    base = tmp_path_factory.mktemp('latency')
    return [latency_bench(tarantool, base / 'a'),
            latency_bench(tarantool, base / 'slow', '--delay', '100')]


@pytest.mark.timeout(600)
def test_a_latency_run_records_each_rate_and_the_capacity(latency_runs):
    out = latency_runs[0]
    results = json.loads((out / 'results.json').read_text())
    lat = results['settings']['latency']
    assert lat['generator'] == 'oha ' + oha.VERSION
    assert lat['slo'] == {'percentile': 'p50', 'ms': 20.0}
    steps = [r for r in results['latency']
             if r['rate'] not in ('probe', 'confirm')]
    assert sorted({r['rate'] for r in steps}) == ['200/s', '400/s']
    assert len(steps) == 2 * 3
    # Each point's command, written once: the points differ in URL and rate.
    command = lat['command']
    assert '--latency-correction' in command
    assert command[command.index('-q') + 1] == '{rate}' and '{url}' in command
    for r in steps:
        assert 'command' not in r
        assert set(r['oha']['latency_ms']) == set(oha.FIGURES)
        assert abs(r['oha']['achieved'] - r['offered']) < 0.2 * r['offered'], r
        assert r['us_per_request']['server'] > 0
        assert r['us_per_request']['database'] is not None
        assert r['generator']['share'] < 1.0
    assert len(results['capacity']) == 3
    # Each capacity held for --confirm seconds at its rate (or was stepped
    # down to a rate that did): its runs are in the record of points.
    assert lat['confirm'] == 2
    for c in results['capacity']:
        assert c['confirmed'] in ('held', 'again', 'stepped down', 'not held')
        last_rate, kept = c['confirm_tries'][-1]
        assert c['rate'] == (last_rate if kept else 0.0)
        runs = [r for r in results['latency'] if r['rate'] == 'confirm'
                and r['run'] == c['run']]
        assert [[r['offered'], r['kept']] for r in runs] == [
            list(t) for t in c['confirm_tries']]
        assert all(1.5 < r['oha']['seconds'] < 4 for r in runs), runs
    md = (out / 'results.md').read_text()
    first = md.split('\n## ')[1]
    assert 'offered again for 2 s' in first
    assert first.startswith('Capacity at p50 ≤ 20 ms'), md[:2000]
    assert 'oha %s' % oha.VERSION in md
    for chart in ('chart-latency-good.png', 'chart-capacity-good.png'):
        assert (out / chart).read_bytes()[:4] == b'\x89PNG'
    assert '![capacity good](chart-capacity-good.png)' in first
    page = (out / 'results.html').read_text()
    assert 'data:image/png;base64,' in page
    assert not re.search(r'(src|href)\s*=\s*["\']?(\w+:)?//', page)   # no network


@pytest.mark.timeout(600)
def test_each_point_records_the_demand_per_tier(latency_runs):
    """Every fixed-rate point: the server's CPU per request and Tarantool's,
    its transaction thread's apart from its other threads'; the run's
    summary per engine and page in results.json and results.md, and
    advise sizing a site from it."""
    out = latency_runs[0]
    results = json.loads((out / 'results.json').read_text())
    for r in results['latency']:
        d = r['demand']
        assert d['server_us'] > 0 and d['serial_us'] is not None, d
        assert d['spread_us'] is not None and d['written_bytes'] is not None
        assert 0 < d['server_share'] <= 1.5 and d['seconds'] > 0
        # one database process: its serial thread is the one node's
        assert d['nodes_us'] == [d['serial_us']], d
    # over the run, the transaction thread did some of the work
    assert sum(r['demand']['serial_us'] for r in results['latency']) > 0
    [entry] = results['demand']
    assert (entry['target'], entry['page']) == ('aiohttp-tarantool-one', 'good')
    assert entry['split'] == 'measured' and entry['database'] == 'tarantool'
    assert entry['at_capacity']['share'] > 0
    md = (out / 'results.md').read_text()
    assert '## Demand per tier' in md and 'The model at one core' in md
    done = subprocess.run([sys.executable, 'bench.py', 'advise', str(out),
                           '--rate', '1000'], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode in (0, 1), done.stderr
    # 1,000/s within the capacity: the run's own core, measured; past it,
    # sized from the demand
    assert "Sizing: the tiers' CPU per request" in done.stdout or (
        'measured: the run served' in done.stdout) or (
        'shard the writes' in done.stderr), done.stdout + done.stderr


@pytest.mark.timeout(600)
def test_a_point_missed_on_the_percentile_alone_is_run_again(latency_runs):
    """Each such point is followed by its second run at the same rate (out
    of the step tables), and a second by a third when the host watch saw
    the host run slow; no other point is; the slow build's are. A search
    is marked the host's when every try of the rate it stopped at ran on
    a slow host."""
    seconds = 0
    for out in latency_runs:
        results = json.loads((out / 'results.json').read_text())
        slo = results['settings']['latency']['slo']
        # (a capacity's confirming runs follow their own rule: the test
        # above)
        points = [r for r in results['latency'] if r['rate'] != 'confirm']
        tries = 0
        before = {'floor': [f for f in results['floor'] if f['when'] == 'before']}
        most = budget.TRIES if fixed_rate.steady_floor(type('Matrix', (), {
            'results': before, 's': type('S', (), {'slo': slo})})) else 2
        for first, then in zip(points, points[1:] + [{}]):
            assert 'bursts' in first['host'] and 'slow' in first['host'], first
            tries = tries + 1 if first['retry'] else 1
            again = budget.stall_like(first, slo) and tries < most \
                and (tries == 1 or first['host']['slow'])
            assert bool(then.get('retry')) == again, first
            if then.get('retry'):
                seconds += 1
                assert (then['offered'], then['run'], then['rate']) == (
                    first['offered'], first['run'], 'probe')
        for c in results['capacity']:
            at = [r['host']['slow'] for r in points if r['run'] == c['run']
                  and r['offered'] == c['missed_at']]
            assert c['host'] == all(at or [False]), c
        for run in (1, 2, 3):
            tried = [(r['offered'], r['kept']) for r in points if r['run'] == run]
            found = [c for c in results['capacity'] if c['run'] == run]
            assert found[0]['searched'] == budget.capacity(tried)['rate']
    assert seconds >= 3


@pytest.mark.timeout(600)
def test_compare_marks_a_slower_build_worse_and_exits_1(latency_runs):
    a, slow = latency_runs
    # Two runs of one build may differ beyond the band by chance (±30 %
    # here); a run against itself may not.
    same = subprocess.run([sys.executable, 'bench.py', 'compare', str(a), str(a)],
                          cwd=ROOT, capture_output=True, text=True)
    assert same.returncode == 0, same.stdout + same.stderr
    worse = subprocess.run([sys.executable, 'bench.py', 'compare', str(a),
                            str(slow), '--out', str(slow / 'compare.md')],
                           cwd=ROOT, capture_output=True, text=True)
    assert worse.returncode == 1, worse.stdout + worse.stderr
    rows = [r for r in worse.stdout.splitlines() if r.startswith('| p50 ms')]
    assert rows and all(r.rstrip(' |').endswith('worse') for r in rows), worse.stdout
    assert (slow / 'compare.md').read_text() == worse.stdout


def test_compare_works_on_the_committed_runs():
    runs = sorted(os.path.join(ROOT, 'docs', d) for d in os.listdir(
        os.path.join(ROOT, 'docs')) if d == 'results' or d.startswith('results-'))
    assert runs
    for run in runs:
        results = compare.load(run)
        lines, worse = compare.compare(results, results)
        # every timed figure in the run is compared (a run of the mix alone
        # has no closed-loop rates)
        rows = [r for r in lines if r.startswith('| ') and '| figure |' not in r
                and not r.startswith('| ---')]
        assert worse == 0 and len(rows) == len(compare.figures(results)) > 0, run
        assert ('| req/s |' in '\n'.join(lines)) == bool(results['runs']), run


@pytest.mark.bench
def test_compare_refuses_what_is_not_results(tmp_path):
    (tmp_path / 'results.json').write_text('{"x": 1}')
    for args in ([str(tmp_path), str(tmp_path)], ['/nonexistent', str(tmp_path)]):
        done = subprocess.run([sys.executable, 'bench.py', 'compare'] + args,
                              cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 2 and 'bench.py compare: error' in done.stderr


def test_a_change_within_the_runs_spread_is_noise():
    a = (100.0, 90.0, 110.0, 3, True)
    assert compare.verdict(('req/s',), a, (85.0, 80.0, 90.0, 3, True), 10)[2] is None
    assert compare.verdict(('req/s',), a, (60.0, 58.0, 62.0, 3, True), 10)[2] == 'worse'
    assert compare.verdict(('req/s',), a, (150.0, 148.0, 152.0, 3, True), 10)[2] == 'better'
    lat = (1.0, 0.9, 1.1, 3, False)
    assert compare.verdict(('p99 ms',), lat, (1.4, 1.3, 1.5, 3, False), 10)[2] is None
    assert compare.verdict(('p99 ms',), lat, (21.0, 20.0, 22.0, 3, False), 10)[2] == 'worse'
    # A p99 of 200 requests rests on 2 of them: shown, never judged.
    thin = (1.0, 0.9, 1.1, 3, False, True)
    assert compare.verdict(('p99 ms',), thin, (21.0, 20.0, 22.0, 3, False, False),
                           10)[2] == 'too few requests'
    once = (100.0, 100.0, 100.0, 1, True)
    assert compare.verdict(('req/s',), once, (75.0, 75.0, 75.0, 1, True), 10)[2] is None


def test_noisy_cells_and_a_busy_generator_are_flagged():
    def record(run, p99, share):
        return {'target': 'e', 'page': 'good', 'rate': '50%', 'run': run,
                'offered': 100.0, 'kept': True, 'headroom': share < oha.HEADROOM,
                'generator': {'share': share},
                'us_per_request': {'server': 10.0, 'database': 5.0},
                'oha': {'achieved': 100.0, 'requests': 300, 'errors': {}, 'non2xx': 0,
                        'timeouts': 0,
                        'latency_ms': dict.fromkeys(oha.FIGURES, p99)}}
    quiet = cells.steps({'latency': [record(1, 5.0, 0.2), record(2, 5.2, 0.3)]})
    assert quiet[('e', 'good', '50%')]['flags'] == []
    loud = cells.steps({'latency': [record(1, 5.0, 0.2), record(2, 9.0, 0.95)]})
    flags = loud[('e', 'good', '50%')]['flags']
    assert any('generator busy' in f for f in flags) and 'noisy p99' in flags
    # a mix run whose loadgen fell behind its schedule: the host's wait is
    # in its latencies, and the cell says so
    late = record(2, 5.1, 0.2)
    late['oha']['schedule_lag_ms'] = 32.3
    on_time = record(1, 5.0, 0.2)
    on_time['oha']['schedule_lag_ms'] = cells.LAG_MS
    assert cells.steps({'latency': [on_time]})[('e', 'good', '50%')]['flags'] == []
    flags = cells.steps({'latency': [on_time, late]})[('e', 'good', '50%')]['flags']
    assert flags == ['loadgen fell up to 32 ms behind its schedule (counted '
                     'in the latencies)']


def test_results_html_inlines_charts_and_escapes(tmp_path):
    (tmp_path / 'results.md').write_text(
        '# Results\n\n- Machine: <b>x</b>\n\n| a | b |\n| --- | ---: |\n'
        '| x | 1 |\n\n![c](chart-c.png)\n![d](chart-d.png)\n')
    (tmp_path / 'chart-c.png').write_bytes(b'\x89PNG fake')
    page = open(html.write(str(tmp_path))).read()
    assert '&lt;b&gt;x&lt;/b&gt;' in page and '<td class="n">1</td>' in page
    assert 'data:image/png;base64,iVBORyBmYWtl' in page and '(d: no chart)' in page


def test_a_capacity_is_judged_only_beyond_its_search_bracket():
    """Three searches stopping at one step agree exactly, but only to
    within the step: a capacity one step lower is not worse."""
    a = (6983.0, 6983.0, 6983.0, 3, True, False, 10.0)
    b = (5268.0, 5268.0, 5268.0, 3, True, False, 32.6)
    assert compare.verdict(('capacity/s',), a, b, 10)[2] is None
    b = (4000.0, 4000.0, 4000.0, 3, True, False, 10.0)
    assert compare.verdict(('capacity/s',), a, b, 10)[2] == 'worse'


@pytest.mark.bench
def test_a_core_taken_away_for_a_while_shows_as_slow_windows():
    """The core probe counts work in 10 ms windows: 150 ms stopped are at
    least 14 windows at speed 0, in a row."""
    probe = subprocess.Popen([sys.executable, '-m', 'bench.latency.steady',
                              '1.0'], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    assert probe.stderr.readline() == b'measuring\n'
    time.sleep(0.3)     # into its second: the stop is in its windows
    os.kill(probe.pid, signal.SIGSTOP)
    time.sleep(0.15)
    os.kill(probe.pid, signal.SIGCONT)
    out = json.loads(probe.communicate(timeout=30)[0])
    # (at least: on a busy machine other stretches may join it)
    assert 90 <= out['windows'] <= 100, out
    assert out['min'] == 0 and out['longest_ms'] >= 140, out
    assert out['slow_pct'] >= 14 and out['median_us'] > 0, out


@pytest.mark.bench
def test_the_core_probe_refuses_a_bad_length_and_says_why():
    from bench.latency import steady
    for bad in ('0', 'abc', '1e9'):
        done = subprocess.run([sys.executable, '-m', 'bench.latency.steady',
                               bad], cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 1 and 'SECONDS from 0.1 to 600' in (
            done.stderr), (bad, done.stderr)
    said = steady.measure(['false'])
    assert said == {'error': 'the core probe failed (exit 1): no output'}
