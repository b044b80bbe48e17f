"""loadgen and bench.py --latency --pages mix against a real site: latency
counted from when each request was due across a stall, votes that add up
to the site's total, clear errors for bad input."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import ROOT, TEST_PACKS, engine_args, free_port, tarantool_address
from bench import verify
from bench.latency import mixed
from plugins.tools import need_loadgen

# Each test runs loadgen or bench.py itself.
pytestmark = pytest.mark.bench

ENGINE = 'aiohttp-tarantool-one'


def loadgen(*args, timeout=60):
    done = subprocess.run([need_loadgen()] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=timeout)
    return done


def report(url, rate, seconds, connections=64):
    done = loadgen('--url', url, '--rate', rate, '--duration', seconds,
                   '--connections', connections)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope='module')
def site(request, start_server):
    need_loadgen()
    return start_server(ENGINE, *engine_args(request, ENGINE))


def stalled(site, stall, rate=50, seconds=4):
    """A mixed run at `rate` visitors/s over 2 connections; the server is
    stopped (SIGSTOP) for `stall` seconds in the middle when stall > 0."""
    result = {}
    run = threading.Thread(target=lambda: result.update(
        report=report(site.url, rate, seconds, connections=2)))
    run.start()
    if stall:
        time.sleep(1.5)
        os.kill(site.process.pid, signal.SIGSTOP)
        time.sleep(stall)
        os.kill(site.process.pid, signal.SIGCONT)
    run.join(60)
    return result['report']


def test_a_stall_counts_for_every_request_it_held_up(site):
    calm = stalled(site, 0)
    held = stalled(site, 1.0)
    for r in (calm, held):     # the same load got through, every visit whole
        assert r['visitors'] == 200 and r['requests'] == 400, r
        assert r['overall']['status'] == {'200': 400} and not r['overall']['errors'], r
    # About 50 visitors arrived while the server slept: each GET / counts
    # from its arrival, so the slowest 1 % waited most of the second. Timed
    # from when sent, only the 2 requests in flight would have seen it.
    assert held['overall']['latency_ms']['p99'] >= 500, held['overall']
    assert held['kinds']['index']['latency_ms']['p90'] >= 200, held['kinds']['index']
    assert calm['overall']['latency_ms']['p99'] < 500, calm['overall']


def test_the_vote_total_moves_by_the_votes_answered_200(site):
    before = verify.votes(site.url)
    r = report(site.url, 100, 2)
    after = verify.votes(site.url)
    votes = r['kinds']['vote']
    assert r['votes_ok'] == votes['status'].get('200') and r['votes_ok'] > 100, r
    assert after - before == r['votes_ok'], (before, after, r['votes_ok'])
    browsed = sum(r['kinds'][k]['count'] for k in ('good', 'bad', 'about', 'pack'))
    assert browsed + votes['count'] == r['visitors'] == r['kinds']['index']['count']
    assert mixed.vote_check(before, after, mixed.parse(json.dumps(r)))['ok']
    lost = mixed.vote_check(before, after + 1, {'votes_ok': r['votes_ok']})
    assert not lost['ok'] and 'moved by %d but %d' % (
        after + 1 - before, r['votes_ok']) in lost['reason']


@pytest.mark.parametrize('args, message', [
    (['--url', 'http://127.0.0.1:1', '--rate', '10', '--duration', '1'],
     'cannot connect to 127.0.0.1:1'),
    (['--url', 'http://127.0.0.1:1', '--rate', '0', '--duration', '1'],
     '--rate must be above 0'),
    (['--url', 'http://127.0.0.1:1', '--rate', 'ten', '--duration', '1'],
     '--rate "ten" is not a number'),
    (['--url', 'https://example.org/x', '--rate', '10', '--duration', '1'],
     'only http://HOST:PORT'),
    (['--rate', '10', '--duration', '1'], '--url is required'),
])
def test_bad_input_is_a_clear_error_not_a_panic(args, message):
    done = loadgen(*args)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert 'panicked' not in done.stderr and not done.stdout


def test_an_unreachable_site_fails_the_run_with_its_reason():
    need_loadgen()
    argv = mixed.command(mixed.find(), 'http://127.0.0.1:1', 20, 1, 4, 2)
    record = mixed.run(argv, 1, 20)
    assert record['oha'] is None and record['exit_code'] == 2, record
    assert 'cannot connect to 127.0.0.1:1' in record['error'], record


def test_the_mix_needs_latency():
    done = subprocess.run([sys.executable, 'bench.py', '--pages', 'mix',
                           '--engines', ENGINE], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and 'mix goes with --latency' in done.stderr, done.stderr


def test_a_mixed_latency_run_records_rates_capacity_and_votes(tarantool, tmp_path):
    need_loadgen()
    a = tarantool_address(tarantool)
    argv = [sys.executable, 'bench.py', '--latency', '--engines', ENGINE,
            '--pages', 'mix', '--duration', '1', '--warmup', '1', '--runs', '1',
            '--rates', '100,200', '--slo', 'p99=200ms', '--confirm', '2',
            '--tarantool', '%s:%d' % (a.host, a.port), '--packs', str(TEST_PACKS),
            '--port', str(free_port()), '--out', str(tmp_path)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / 'results.json').read_text())
    assert results['settings']['latency']['mix']['generator'] == 'loadgen ' + mixed.VERSION
    assert not results['runs']      # no closed-loop wrk runs of the mix
    points = [r for r in results['latency'] if r['page'] == 'mix']
    assert sorted({r['rate'] for r in points
                   if r['rate'] not in ('probe', 'confirm')}) == ['100/s', '200/s']
    for r in points:
        assert r['vote_check']['ok'] and r['vote_check']['moved'] > 0, r
        assert r['oha']['schedule_lag_ms'] >= 0, r
    # the machine's floor, before and after: nginx at a fixed rate
    assert [f['when'] for f in results['floor']] == ['before', 'after']
    for f in results['floor']:
        assert len(f['runs']) == 3 and all(r['p99'] > 0 for r in f['runs']), f
        core = f['core']
        assert core['windows'] > 200 and 0 <= core['min'] <= core['p1'], f
        assert 0 <= core['slow_pct'] <= 100 and core['median_us'] > 0, f
    report = (tmp_path / 'results.md').read_text()
    assert "Machine floor (what the host alone adds): nginx's `/ugly`" in report
    assert "The server's core ran at under half speed in" in report
    # each point starts from the total its previous one settled on
    for last, r in zip(points, points[1:]):
        assert r['vote_check']['before'] == last['vote_check']['after'], r
        assert set(r['oha']['kinds']) >= {'index', 'vote'}, r
        vote = r['oha']['kinds']['vote']
        assert vote['requests'] == r['oha']['votes_ok'] and vote['failed'] == 0
        assert sum(k['requests'] for k in r['oha']['kinds'].values()) \
            == r['oha']['requests'], r
    steps = [r for r in points if r['rate'] not in ('probe', 'confirm')]
    assert all(abs(r['oha']['achieved'] - r['offered']) < 0.2 * r['offered'] for r in steps)
    assert [c['page'] for c in results['capacity']] == ['mix']
    assert results['saturation'][0]['oha']['achieved'] > 0
    md = (tmp_path / 'results.md').read_text()
    assert '| aiohttp-tarantool-one | 100/s | vote |' in md
    assert '| engine | mix |' in md     # the capacity table
