"""The benchmark runner: its arithmetic, its command line, and one quick real
run of two engines and nginx against the test Tarantool."""
import io
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import ROOT, TEST_PACKS, free_port, tarantool_address
from bench import (cli, guesses, outline, profile, pythons, references,
                   report, stats, tables, verify)
from bench.charts import label
from bench.latency import budget, mixed, oha
from runtime import frameworks
from runtime.processes import answers
from bench.progress import Progress, clock
from plugins import tools

QUICK_ENGINES = ['aiohttp-tarantool-one', 'sanic-tarantool-one-uvloop']
QUICK_PAGES = ['ugly', 'good', 'vote']


def wrk_report(rps=1000.0, requests=10000, non2xx=0, p50=1.0, p99=5.0, **errors):
    return {'requests': requests, 'seconds': requests / rps,
            'requests_per_sec': rps, 'non2xx': non2xx,
            'latency_ms': {'p50': p50, 'p90': p50, 'p99': p99, 'max': p99},
            'socket_errors': dict({'connect': 0, 'read': 0, 'write': 0,
                                   'timeout': 0}, **errors)}


def timed(report_, run=1, **extra):
    return dict({'run': run, 'exit_code': 0, 'wrk': report_}, **extra)


# --- wrk output -------------------------------------------------------------

def test_parse_wrk_takes_the_last_json_line():
    line = json.dumps(wrk_report(rps=1234.5))
    stdout = 'Running 1s test @ http://x\n  1 threads\n%s\n' % line
    assert stats.parse_wrk(stdout)['requests_per_sec'] == 1234.5


@pytest.mark.parametrize('stdout, message', [
    ('Running 1s test\nRequests/sec: 5.0\n', 'no report line'),
    ('{"requests": 1,\n', 'bad report line'),
    ('{"requests": 1, "seconds": 1}\n', 'lacks'),
])
def test_parse_wrk_rejects_missing_or_broken_reports(stdout, message):
    with pytest.raises(stats.WrkOutputError, match=message):
        stats.parse_wrk(stdout)


# --- medians, ratios, flags -------------------------------------------------

def test_median_and_ratio():
    assert stats.median([3, 1, 2]) == 2
    assert stats.median([4, 1, 2, 3]) == 2.5
    assert stats.median([None, 5]) == 5
    assert stats.median([]) is None
    assert stats.ratio(1, 4) == 0.25
    assert stats.ratio(None, 4) is None and stats.ratio(1, 0) is None


def test_a_clean_run_is_not_flagged():
    assert stats.problems(timed(wrk_report(non2xx=100, requests=10000, read=100))) == []


@pytest.mark.parametrize('run, expected', [
    (timed(wrk_report(non2xx=101, requests=10000)), '1.0% non-2xx'),
    (timed(wrk_report(requests=1000, timeout=20)), 'socket errors (timeout 20)'),
    (timed(wrk_report(requests=1000, connect=5, read=6)), 'connect 5, read 6'),
    (dict(timed(wrk_report()), exit_code=1), 'wrk exited with 1'),
    (timed(None, error='no report line'), 'no report line'),
    (timed(wrk_report(requests=0)), 'no request completed'),
    (timed(wrk_report(), vote_check={'ok': False, 'reason': 'moved by 3'}),
     'moved by 3'),
])
def test_bad_runs_are_flagged(run, expected):
    assert any(expected in p for p in stats.problems(run)), stats.problems(run)


def test_vote_check_bounds():
    seen = {'votes': 100, 'posts': 110}
    assert stats.vote_check(1000, 1100, seen)['ok']
    assert stats.vote_check(1000, 1110, seen)['ok']  # answers wrk never read
    assert not stats.vote_check(1000, 1099, seen)['ok']  # a 2xx not counted
    assert not stats.vote_check(1000, 1111, seen)['ok']  # more than was sent
    assert not stats.vote_check(None, 1100, seen)['ok']
    assert not stats.vote_check(0, 0, {'votes': 0, 'posts': 0})['ok']


def test_runs_without_latency_samples_are_left_out_of_latency_medians():
    untimed = wrk_report(rps=50)
    untimed['latency_ms'] = {}
    cell = stats.summarize([timed(untimed), timed(wrk_report(p50=4.0), run=2)])
    assert cell['p50'] == 4.0 and cell['rps'] == (50 + 1000) / 2


def test_summarize_medians_ranges_errors_and_flags():
    runs = [timed(wrk_report(rps=r, p50=p, requests=1000, read=e), run=i)
            for i, (r, p, e) in enumerate([(300, 3, 0), (100, 1, 0), (200, 2, 50)], 1)]
    cell = stats.summarize(runs)
    assert (cell['rps'], cell['rps_min'], cell['rps_max']) == (200, 100, 300)
    assert cell['p50'] == 2
    assert cell['errors'] == 50
    assert cell['flags'] == ['run 3: 5.0% socket errors (read 50)']


def test_ratios_of_a_table():
    table = {
        ('e', 'ugly', 'plain'): {'rps': 1000}, ('e', 'about', 'plain'): {'rps': 500},
        ('e', 'ugly', 'pipelined'): {'rps': 3000},
        ('nginx', 'ugly', 'plain'): {'rps': 10000},
    }
    assert report.ratios(table, 'e', 'ugly', 'plain') == {
        'nginx': 0.1, 'hello': None, 'ugly': None, 'reference': None,
        'pipelined': None, 'vinyl': None, 'replicas': None}
    table[('e (memtx)', 'good', 'plain')] = {'rps': 800}
    table[('e (vinyl)', 'good', 'plain')] = {'rps': 200}
    assert report.ratios(table, 'e (vinyl)', 'good', 'plain')['vinyl'] == 0.25
    assert report.ratios(table, 'e (memtx)', 'good', 'plain')['vinyl'] is None
    table[('e (vinyl, 2 replicas)@3.12', 'good', 'plain')] = {'rps': 300}
    table[('e (vinyl)@3.12', 'good', 'plain')] = {'rps': 200}
    assert report.ratios(table, 'e (vinyl, 2 replicas)@3.12', 'good',
                         'plain')['replicas'] == 1.5
    assert report.ratios(table, 'e (vinyl, 2 replicas)@3.12', 'good',
                         'plain')['vinyl'] is None   # no memtx twin here
    r = report.ratios(table, 'e', 'about', 'plain')
    assert r['ugly'] == 0.5 and r['nginx'] is None  # no nginx about measured
    assert report.ratios(table, 'e', 'ugly', 'pipelined')['pipelined'] == 3.0
    assert report.ratios(table, 'nginx', 'ugly', 'plain')['nginx'] is None


def test_postgres_and_redis_are_divided_by_tarantool_on_memtx():
    table = {('aiohttp-tarantool-one (memtx)', 'good', 'plain'): {'rps': 800},
             ('aiohttp-tarantool-one (vinyl)', 'good', 'plain'): {'rps': 100},
             ('aiohttp-redis-one', 'good', 'plain'): {'rps': 400},
             ('aiohttp-postgres-pool', 'good', 'plain'): {'rps': 200}}
    for name, expected in (('aiohttp-redis-one', 0.5),
                           ('aiohttp-postgres-pool', 0.25)):
        assert report.ratios(table, name, 'good', 'plain')['reference'] == \
            expected
    del table[('aiohttp-tarantool-one (memtx)', 'good', 'plain')]
    table[('aiohttp-tarantool-one', 'good', 'plain')] = {'rps': 400}
    assert report.ratios(table, 'aiohttp-redis-one', 'good',
                         'plain')['reference'] == 1.0


def test_an_engine_ugly_is_divided_by_its_own_framework_and_loop_hello():
    table = {
        ('sanic-tarantool-one-uvloop', 'ugly', 'plain'): {'rps': 3000},
        ('sanic-tarantool-one-uvloop', 'good', 'plain'): {'rps': 1000},
        ('hello-sanic-uvloop', 'ugly', 'plain'): {'rps': 4000},
        ('hello-sanic', 'ugly', 'plain'): {'rps': 9000},
    }
    r = report.ratios(table, 'sanic-tarantool-one-uvloop', 'ugly', 'plain')
    assert r['hello'] == 0.75
    assert report.ratios(table, 'sanic-tarantool-one-uvloop', 'good',
                         'plain')['hello'] is None
    assert report.ratios(table, 'hello-sanic', 'ugly', 'plain')['hello'] is None


def test_bare_hello_uses_the_reference_runs_paired_with_the_engine():
    def run(target, rps, pair=None):
        r = timed(wrk_report(rps=rps), target=target, page='ugly', mode='plain')
        if pair:
            r['pair'] = pair
        return r
    one, multi = 'sanic-tarantool-one-uvloop', 'sanic-tarantool-multi-uvloop'
    ref = 'hello-sanic-uvloop'
    table = tables.cells({'runs': [
        run(one, 3000), run(ref, 4000, one), run(one, 3000), run(ref, 4000, one),
        run(multi, 1000), run(ref, 1000, multi), run(ref, 2000, multi)]})
    assert table[(ref, 'ugly', 'plain')]['rps'] == 3000   # all its runs
    assert report.ratios(table, one, 'ugly', 'plain')['hello'] == 0.75
    assert report.ratios(table, multi, 'ugly', 'plain')['hello'] == 1000 / 1500


def test_an_engine_s_hello_reference_is_its_framework_and_loop():
    assert references.of_engine('sanic-postgres-pool-uvloop') == 'hello-sanic-uvloop'
    assert references.of_engine('japronto-tarantool-one') == 'hello-japronto'
    assert references.of_engine('aiohttp-tarantool-multi-uvloop') == 'hello-aiohttp-uvloop'
    assert references.of_engine('nginx') is None


# --- profile arithmetic -----------------------------------------------------

SITE = '/srv/app/.venv/lib/python3.11/site-packages/'
RAW = '\n'.join([
    # The loop alone, then the framework, then a template under pages.
    '<module> (%s/server.py:152);run (/usr/lib/python3.11/asyncio/runners.py:1) 7',
    '<module> (%s/server.py:152);handle (' + SITE + 'aiohttp/web_protocol.py:5) 5',
    'handle (' + SITE + 'aiohttp/web_app.py:1);good (%s/pages/site.py:9);'
    'render (' + SITE + 'jinja2/environment.py:1);root (%s/templates/top.html:3) 4',
    # A standard library frame counts for its caller: pages, then the driver.
    'good (%s/pages/site.py:9);uuid4 (/usr/lib/python3.11/uuid.py:7) 2',
    'good (%s/pages/site.py:9);call (%s/data_interface/pg.py:3);'
    'execute (' + SITE + 'asyncpg/connection.py:2);wait_for (/usr/lib/'
    'python3.11/asyncio/tasks.py:4) 3',
    '',
]).replace('%s', profile.ROOT)


def test_stacks_count_for_their_innermost_layer():
    assert profile.fold(RAW) == {'framework': 12, 'pages': 2, 'templates': 4,
                                 'driver': 3}
    assert profile.classify([]) == 'framework'
    assert profile.layer_of('/usr/lib/python3.7/json/decoder.py') is None
    assert profile.layer_of(SITE + 'markupsafe/__init__.py') == 'templates'
    # Django is a framework, its ORM a driver.
    assert profile.layer_of(SITE + 'django/core/handlers/asgi.py') == \
        'framework'
    assert profile.layer_of(SITE + 'django/db/models/query.py') == 'driver'


def test_layers_add_up_to_the_measured_cpu_per_request():
    us = profile.split({'framework': 6, 'pages': 1, 'templates': 2, 'driver': 1},
                       utime=2.0, stime=0.5, database=1.0, requests=10000)
    assert us['framework'] == pytest.approx(120) and us['driver'] == pytest.approx(20)
    assert us['kernel'] == pytest.approx(50) and us['database'] == pytest.approx(100)
    assert sum(us[k] for k in profile.PYTHON_LAYERS + ('kernel',)) == \
        pytest.approx(us['server']) == pytest.approx(250)
    assert profile.split(dict.fromkeys(profile.PYTHON_LAYERS, 0), 1.0, 0.0,
                         None, 100)['framework'] is None
    assert profile.split({}, 1.0, 0.0, None, 0) is None


def test_flagged_cells_are_marked_not_hidden():
    results = {'runs': [
        dict(timed(wrk_report(rps=100, requests=100, non2xx=50)), target='e',
             page='good', mode='plain', warmup=False),
        dict(timed(wrk_report(rps=9)), target='e', page='good', mode='plain',
             warmup=True, run=0)]}
    table = tables.cells(results)
    lines = report.page_table(table, ['e'], 'good', 'plain')
    assert '| e | 100 (100–100) |' in lines[2] and '50 ⚠' in lines[2]
    assert any('50.0% non-2xx' in line for line in lines)


# --- small helpers ----------------------------------------------------------

def test_progress_lines_without_a_terminal():
    stream = io.StringIO()
    progress = Progress(100.0, stream)
    progress.show('e · ugly · plain · run 1/3')
    progress.advance(50)
    progress.drop(25)
    progress.show('e · ugly · plain · run 2/3')
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith('[bench]   0% e · ugly · plain · run 1/3  ETA')
    assert lines[1].startswith('[bench]  66% ')
    assert clock(59) == '59s' and clock(61) == '1m01s' and clock(3720) == '1h02m'


def test_engine_labels_fit_on_three_lines():
    assert label('sanic-tarantool-multi-uvloop') == 'sanic\ntarantool multi\nuvloop'
    assert label('aiohttp-tarantool-one') == 'aiohttp\ntarantool one\nasyncio'


def test_help_lists_every_option(capsys):
    with pytest.raises(SystemExit) as e:
        cli.plan(['--help'])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for option in ('--latency', '--rates', '--slo', '--delay', '--pythons'):
        assert option in out


@pytest.mark.parametrize('argv, message', [
    (['--engines', 'nosuch*'], "no engine matches 'nosuch*'"),
    (['--pages', 'ugly,home'], 'unknown pages home'),
    (['--connections', '2', '--threads', '3'], 'cannot exceed'),
    (['--duration', '0'], 'must be 1 or more'),
    (['--tarantool', 'nohost'], '--tarantool'),
    (['--pipelined', '--pages', 'vote'], 'nothing to time'),
    (['--workers', '0'], 'must be 1..256'),
    (['--workers', '2', '--profile'], 'leave out --workers'),
    (['--core-hour-price', 'abc'], "argument --core-hour-price: dollars per "
     "core-hour (e.g. 0.04): 'abc' is not a number"),
    (['--core-hour-price', '0'], '(e.g. 0.04) must be above zero (got 0)'),
    (['--core-hour-price=-0.5'], 'must be above zero (got -0.5)'),
    (['--first', '--quick'], '--first is a run of its own: leave out --quick'),
])
@pytest.mark.bench
def test_bad_arguments_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        cli.plan(argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_unknown_engine_lists_the_engines(capsys):
    with pytest.raises(SystemExit):
        cli.plan(['--engines', 'sanic-*,flask-*'])
    assert 'aiohttp-tarantool-one-uvloop' in capsys.readouterr().err


def test_quick_fills_only_what_was_not_given():
    s = cli.plan(['--quick', '--runs', '2', '--engines', 'sanic-tarantool-one*',
                      '--plain', '--out', '/nonexistent'])
    assert (s.duration, s.warmup, s.runs) == (1, 1, 2)
    assert s.modes == ['plain']
    assert [e.name for e in s.engines] == ['sanic-tarantool-one',
                                           'sanic-tarantool-one-uvloop']


@pytest.mark.bench
def test_first_run_prints_its_plan_and_estimate_and_starts_nothing(tmp_path):
    """bench.py --first --dry-run: the engines, pages and durations of the
    first run and its expected duration (at most 5 minutes), nothing run."""
    out = tmp_path / 'out'
    done = subprocess.run(
        [sys.executable, 'bench.py', '--first', '--dry-run', '--port',
         str(free_port()), '--out', str(out)], cwd=ROOT, capture_output=True,
        text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    plan = next(x for x in lines if x.startswith('plan: '))
    for engine in cli.FIRST['engines']:
        assert engine in plan
    assert plan.startswith('plan: 4 engines (')
    assert 'each with its bare hello on ugly, nginx' in plan
    assert '  pages ugly, good, index: plain, 1 run of 2 s after 1 s of warmup' in lines
    if mixed.find() and oha.find():
        assert ('  fixed rates for mix: 50, 90 % of saturation, then '
                'up to 3 probes for the capacity at p99 ≤ 10 ms (a point that '
                'misses on it alone is run again); 2 s each, searched once') in lines
    else:
        assert '--first: without the mix' in done.stderr
    expected = re.search(r'^expected: about (\d+) min \(estimate from '
                         r'bench/guesses.py; done near \d\d:\d\d\)$',
                         done.stderr, re.M)
    assert expected and 2 <= int(expected.group(1)) <= 5, done.stderr
    assert lines[-1] == 'results: %s' % out
    assert not out.exists() and '[bench]' not in done.stderr


@pytest.mark.bench
def test_first_fills_only_what_was_not_given():
    s = cli.plan(['--first', '--runs', '2', '--engines', 'aiohttp-tarantool-one-uvloop',
                  '--out', '/nonexistent'])
    assert [e.name for e in s.engines] == ['aiohttp-tarantool-one-uvloop']
    assert (s.duration, s.warmup, s.runs, s.modes) == (2, 1, 2, ['plain'])
    if mixed.find() and oha.find():
        assert s.pages == ['ugly', 'good', 'index', 'mix']
        assert s.latency and s.fixed_pages == ['mix']
    assert not cli.plan(['--first', '--pages', 'good', '--out', '/x']).latency


@pytest.mark.bench
def test_rate_pages_and_fractions_choose_what_gets_fixed_rates(capsys):
    tools.need_oha()
    tools.need_loadgen()
    base = ['--engines', 'aiohttp-tarantool-one-uvloop', '--latency', '--plain',
            '--out', '/nonexistent']
    s = cli.plan(base + ['--pages', 'ugly,good,mix', '--rate-pages', 'good',
                         '--fractions', '0.9,0.5', '--profile'])
    # the mix has no closed loop: it is offered rates whether named or not
    assert s.fixed_pages == ['good', 'mix'] and s.fractions == (0.5, 0.9)
    assert [p for p in s.pages if guesses.offers_rates(s, p)] == ['good', 'mix']
    lines = outline.lines(s, 0)
    assert '  fixed rates for good, mix: 50, 90 % of saturation, then up to ' \
        '3 probes for the capacity at p99 ≤ 10 ms (a point that misses on it ' \
        'alone is run again); 10 s each, searched 3 times' in lines
    assert '  each capacity found offered again for 10 s (a miss steps it ' \
        'down)' in lines
    # the points may be shorter than the closed-loop runs
    s = cli.plan(base + ['--pages', 'good', '--duration', '5',
                         '--point-duration', '3'])
    assert (s.duration, s.point_duration) == (5, 3)
    assert any(x.startswith('  fixed rates for good:') and x.endswith(
        '3 s each, searched 3 times') for x in outline.lines(s, 0))
    assert cli.plan(base + ['--pages', 'good', '--duration', '4']).point_duration == 4
    assert ('  plus one profiled run per engine and page (not mix: no closed '
            'loop)') in lines
    assert cli.plan(base + ['--pages', 'good']).fixed_pages is None
    for wrong, said in (
            (['--pages', 'good', '--rate-pages', 'ugly'], '--rate-pages ugly: not'),
            (['--pages', 'good,vote', '--rate-pages', 'vote'], '--rate-pages vote: not'),
            (['--pages', 'good', '--fractions', '0.5', '--rates', '100'],
             '--rates or --fractions'),
            (['--pages', 'good', '--fractions', '2'], 'up to 1.5')):
        with pytest.raises(SystemExit) as exit:
            cli.plan(base + wrong)
        assert exit.value.code == 2 and said in capsys.readouterr().err, wrong
    for alone in (['--rate-pages', 'good'], ['--point-duration', '3']):
        with pytest.raises(SystemExit):
            cli.plan(alone + ['--out', '/nonexistent'])
        assert 'go with --latency' in capsys.readouterr().err


@pytest.mark.bench
def test_rate_pages_may_give_a_page_fewer_searches(capsys):
    tools.need_oha()
    tools.need_loadgen()
    base = ['--engines', 'aiohttp-tarantool-one-uvloop', '--latency', '--plain',
            '--out', '/nonexistent', '--pages', 'ugly,good,mix', '--runs', '3']
    s = cli.plan(base + ['--rate-pages', 'mix,good:1,ugly:2'])
    assert s.fixed_pages == ['mix', 'good', 'ugly']
    assert [guesses.searches(s, p) for p in s.fixed_pages] == [3, 1, 2]
    assert any(x.endswith('each, searched ugly 2 times, good once, mix 3 times')
               for x in outline.lines(s, 0))
    # the estimate counts each page's searches: one fewer, one search less
    fewer = cli.plan(base + ['--rate-pages', 'mix,good:1,ugly:1'])
    point = guesses.point_guess(s, 'ugly')
    steps = (len(s.fractions) + budget.PROBES) * (1 + budget.RETRIED)
    confirm = guesses.CONFIRMED * (s.confirm + point - s.point_duration)
    assert guesses.series_guess(s, 'ugly') - guesses.series_guess(
        fewer, 'ugly') == pytest.approx(steps * point + confirm)
    # a bare hello is a closed-loop reference: it is not searched
    assert guesses.series_guess(s, 'ugly', 'hello') == guesses.series_guess(
        cli.plan(base + ['--rate-pages', 'mix']), 'ugly', 'hello')
    same = cli.plan(base + ['--rate-pages', 'mix,good:3'])
    assert any(x.endswith('each, searched 3 times') for x in outline.lines(same, 0))
    for wrong in ('good:0', 'good:x', 'good:-1', 'good:1.5'):
        with pytest.raises(SystemExit) as exit:
            cli.plan(base + ['--rate-pages', wrong])
        assert exit.value.code == 2
        assert 'PAGE or PAGE:SEARCHES' in capsys.readouterr().err, wrong


@pytest.mark.bench
def test_unavailable_engines_are_skipped_with_the_reason(monkeypatch):
    from runtime import engines
    monkeypatch.setattr(engines, 'runs_here', lambda e: (
        'no: sanic is not installed' if e.framework == 'sanic' else
        'via .venv37 (Python 3.7)' if e.framework == 'japronto' else 'yes'))
    monkeypatch.setattr(engines, 'unavailable', lambda e: None)
    runnable, where, skipped = cli.select_engines(['*-tarantool-one'],
                                                  lambda m: pytest.fail(m))
    assert [e.name for e in runnable] == [
        f + '-tarantool-one' for f in frameworks.NAMES if f != 'sanic']
    assert skipped == [('sanic-tarantool-one', 'sanic is not installed')]
    assert where['aiohttp-tarantool-one'] == [pythons.MAIN]
    assert where['japronto-tarantool-one'] == [pythons.legacy()]


@pytest.mark.bench
def test_verification_fails_a_site_with_the_wrong_pages(tmp_path):
    (tmp_path / 'ugly').write_text('UGLY!')
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, '-m', 'http.server', '-b', '127.0.0.1', str(port)],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if answers('127.0.0.1', port):
                break
            time.sleep(0.05)
        checks = verify.engine('http://127.0.0.1:%d' % port)
    finally:
        server.terminate()
        server.wait()
    assert [c['check'] for c in checks] == ['ugly', 'api']  # stops at the API
    assert not any(c['ok'] for c in checks)
    assert verify.failure(checks).startswith("ugly: body b'UGLY!'")


@pytest.mark.bench
@pytest.mark.parametrize('fault', [KeyboardInterrupt, RuntimeError])
def test_an_engine_started_but_not_yet_timed_is_stopped_on_a_fault(
        tarantool, tmp_path, monkeypatch, fault):
    """Ctrl-C (or a crash) while an engine's memory is measured, after it
    started and before its pages are timed: its server.py is stopped, as
    the servers being timed are."""
    from bench import memory
    seen = []

    def fails(engine, server, *args):
        seen.append(server)
        raise fault('at the memory step')
    monkeypatch.setattr(memory, 'database_pids', fails)
    monkeypatch.setattr(cli.signal, 'signal', lambda *args: None)  # pytest's
    a = tarantool_address(tarantool)
    argv = ['--quick', '--engines', 'aiohttp-tarantool-one', '--pages', 'ugly',
            '--tarantool', '%s:%d' % (a.host, a.port), '--packs', str(TEST_PACKS),
            '--port', str(free_port()), '--out', str(tmp_path / 'out')]
    try:
        cli.main(argv)
    except RuntimeError:
        assert fault is RuntimeError
    assert len(seen) == 1
    assert seen[0].process.poll() is not None, 'server.py left running'
    assert not answers('127.0.0.1', seen[0].port)


# --- one quick real run -----------------------------------------------------

@pytest.fixture(scope='module')
def quick_run(tarantool, tmp_path_factory):
    tools.need('wrk', 'nginx')
    return quick_bench(tarantool, tmp_path_factory, '--engines',
                       ','.join(QUICK_ENGINES), '--pages', ','.join(QUICK_PAGES))


def quick_bench(tarantool, tmp_path_factory, *options):
    """(finished bench.py --quick process, its output directory)."""
    out = tmp_path_factory.mktemp('bench') / 'out'
    a = tarantool_address(tarantool)
    argv = [sys.executable, 'bench.py', '--quick'] + list(options) + [
        '--tarantool', '%s:%d' % (a.host, a.port), '--packs', str(TEST_PACKS),
        '--port', str(free_port()), '--out', str(out)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    return done, out


@pytest.mark.timeout(600)
def test_quick_run_writes_every_file(quick_run):
    done, out = quick_run
    for name in ['results.json', 'results.md'] + [
            'chart-%s.png' % p for p in QUICK_PAGES]:
        assert (out / name).is_file(), name
    assert '[bench]' in done.stderr and 'ETA' in done.stderr


@pytest.mark.timeout(600)
def test_quick_run_says_its_plan_first_and_its_page_last(quick_run):
    done, out = quick_run
    err = done.stderr
    assert re.search(r'^expected: about \d+ (s|min) ', err, re.M), err
    assert err.index('expected: about') < err.index('[bench]')
    assert done.stdout.splitlines()[-1] == 'open:    %s' % (out / 'results.html')


@pytest.mark.timeout(600)
def test_quick_run_costs_each_engine_at_its_req_per_core(quick_run):
    _, out = quick_run
    results = json.loads((out / 'results.json').read_text())
    cost = results['cost']
    assert cost['core_hour_price'] == 0.04 and cost['price_source'].startswith(
        'an assumption')
    rows = {(r['target'], r['page']): r for r in cost['rows']}
    assert {name for name, _ in rows} == set(QUICK_ENGINES)
    table = tables.cells(results)
    for (name, page), r in rows.items():
        rps = table[(name, page, 'plain')]['rps']
        assert r['basis'] == 'saturation' and r['per_core'] == round(rps, 1)
        # a core-hour's $0.04 over the requests of an hour, per million
        assert r['per_million'] == pytest.approx(0.04e6 / (rps * 3600), rel=1e-3)
    aiohttp_good = '%.4f' % rows['aiohttp-tarantool-one', 'good']['per_million']
    md = (out / 'results.md').read_text()
    assert '## Cost per million requests' in md
    assert re.search(r'^\| aiohttp-tarantool-one \| [0-9.]+ \| %s \|'
                     % re.escape(aiohttp_good), md, re.M), md
    assert '<td class="n">%s</td>' % aiohttp_good in (out / 'results.html').read_text()


@pytest.mark.timeout(600)
def test_quick_run_records_machine_runs_and_verification(quick_run):
    _, out = quick_run
    results = json.loads((out / 'results.json').read_text())
    assert results['machine']['cores'] >= 1 and results['versions']['python']
    assert results['versions']['packages']['aiohttp']
    if len(results['machine']['usable_cores']) >= 2:
        assert results['pinning']['server'].startswith('taskset -c')
        assert results['pinning']['wrk'].startswith('taskset -c')
    status = {t['name']: t for t in results['targets']}
    for name in QUICK_ENGINES + ['nginx']:
        assert status[name]['status'] == 'ok', status[name]
        assert all(c['ok'] for c in status[name]['verification'])
        # Its Tarantool is given by address: not its to read.
        plausible_memory(status[name], database=False)
    timed = [r for r in results['runs'] if not r['warmup']]
    # 2 engines x (ugly, good both modes + vote plain) + nginx ugly x 2 modes
    # + 2 hello references ugly x 2 modes
    assert len(timed) == 2 * 5 + 2 + 2 * 2
    for r in timed:
        assert r['exit_code'] == 0 and r['wrk']['requests'] > 0
        assert r['wrk']['requests_per_sec'] > 0
        # A short pipelined run may see no whole batch back: no latency then.
        p50 = r['wrk']['latency_ms'].get('p50')
        assert p50 > 0 if r['mode'] == 'plain' else p50 is None or p50 > 0
        if r['page'] == 'vote':
            assert r['vote_check']['ok'], r['vote_check']
            assert r['wrk']['votes'] > 0


@pytest.mark.timeout(600)
def test_results_md_agrees_with_the_raw_runs(quick_run):
    _, out = quick_run
    results = json.loads((out / 'results.json').read_text())
    md = (out / 'results.md').read_text()
    groups = {}
    for r in results['runs']:
        if not r['warmup']:
            groups.setdefault((r['target'], r['page'], r['mode']), []).append(
                r['wrk']['requests_per_sec'])
    assert ('nginx', 'ugly', 'plain') in groups
    assert ('nginx', 'ugly', 'pipelined') in groups
    for (target, page, mode), rps in groups.items():
        section = md.split('### %s · %s\n' % (page, mode))[1].split('\n## ')[0]
        m = re.search(r'^\| %s \| ([\d,]+) \(' % re.escape(target), section, re.M)
        assert m, (target, page, mode)
        assert abs(int(m.group(1).replace(',', '')) - stats.median(rps)) <= 0.5


@pytest.mark.timeout(600)
def test_charts_are_pngs(quick_run):
    _, out = quick_run
    for page in QUICK_PAGES:
        data = (out / ('chart-%s.png' % page)).read_bytes()
        assert data[:8] == b'\x89PNG\r\n\x1a\n'
        width, height = struct.unpack('>II', data[16:24])
        assert width >= 600 and height >= 400
        assert os.path.getsize(out / ('chart-%s.png' % page)) > 10000


@pytest.mark.timeout(600)
def test_quick_run_has_the_hello_references_and_their_ratio(quick_run):
    _, out = quick_run
    results = json.loads((out / 'results.json').read_text())
    status = {t['name']: t for t in results['targets']}
    for name in ('hello-aiohttp', 'hello-sanic-uvloop'):
        assert status[name]['status'] == 'ok', status[name]
        assert [c['check'] for c in status[name]['verification']] == ['ugly']
    # A reference's ugly runs take turns with its engine's.
    for engine, ref in (('aiohttp-tarantool-one', 'hello-aiohttp'),
                        ('sanic-tarantool-one-uvloop', 'hello-sanic-uvloop')):
        for mode in ('plain', 'pipelined'):
            turns = [r for r in results['runs'] if r['page'] == 'ugly'
                     and r['mode'] == mode and r['target'] in (engine, ref)]
            assert [(r['target'], r['warmup']) for r in turns] == [
                (engine, True), (ref, True), (engine, False), (ref, False)]
            assert all(r.get('pair') == engine for r in turns if r['target'] == ref)
    md = (out / 'results.md').read_text()
    assert '| ugly ÷ bare hello |' in md
    section = md.split('### ugly · plain\n')[1].split('\n## ')[0]
    assert '÷ bare hello' in section.splitlines()[1]
    assert re.search(r'^\| hello-sanic-uvloop \| [\d,]+ \(', section, re.M)
    row = re.search(r'^\| sanic-tarantool-one-uvloop \|.*$', section, re.M).group(0)
    header = [c.strip() for c in section.splitlines()[1].split('|')]
    cell = row.split('|')[header.index('÷ bare hello')].strip()
    assert float(cell) > 0


# --- one quick profiled run -------------------------------------------------

PROFILE_ENGINE = 'aiohttp-tarantool-multi'
# py-spy takes 100-150 samples a second of load (200 while the server holds
# the GIL): 1 s left /good's pages (4 % of them) none about once in 70 runs;
# 3 s give 300-470, and its pages + templates (6 %) none once in 10^5-10^6.
PROFILE_SECONDS = '3'


@pytest.fixture(scope='module')
def profile_run(tarantool, tmp_path_factory):
    tools.need('wrk', 'nginx')
    tools.need_py_spy()
    return quick_bench(tarantool, tmp_path_factory, '--profile', '--plain',
                       '--warmup', '0', '--duration', PROFILE_SECONDS,
                       '--engines', PROFILE_ENGINE, '--pages', 'ugly,good')


@pytest.mark.timeout(600)
def test_profiled_run_splits_the_measured_cpu_by_layer(profile_run):
    done, out = profile_run
    assert 'separate from the timed runs (sampling slows the server a ' \
        'little' in done.stderr
    results = json.loads((out / 'results.json').read_text())
    records = {p['page']: p for p in results['profiles']}
    assert set(records) == {'ugly', 'good'}
    # The profiled run is extra: one timed run per page is still all there is.
    timed = [r for r in results['runs'] if r['target'] == PROFILE_ENGINE]
    assert [(r['page'], r['run']) for r in timed] == [('ugly', 1), ('good', 1)]
    for page, p in records.items():
        us, cpu, samples = p['us_per_request'], p['server_cpu'], p['samples']
        total = sum(samples.values())
        assert p['requests'] > 0 and total > 0
        assert set(samples) == set(profile.PYTHON_LAYERS)
        measured = (cpu['user_s'] + cpu['system_s']) * 1e6 / p['requests']
        assert measured > 0
        parts = [us[k] for k in profile.PYTHON_LAYERS + ('kernel',)]
        assert all(v >= 0 for v in parts) and us['framework'] > 0
        assert sum(parts) == pytest.approx(measured)
        assert us['server'] == pytest.approx(measured)
        # Each Python layer has the share of the user time its samples have.
        user = cpu['user_s'] * 1e6 / p['requests']
        for layer in profile.PYTHON_LAYERS:
            assert us[layer] == pytest.approx(
                user * samples[layer] / total), (layer, p)
        assert p['database_cpu']['process'].startswith('tarantool')
    good = records['good']
    us, samples = good['us_per_request'], good['samples']
    # Only what sampling cannot miss: /good's framework and driver have some
    # 55 % and 35 % of its samples; its page logic (pages/, 4 %) and the
    # parts rendered once that it joins (templates, 2.5 %) may each have
    # none, not both. That pages/ counts as pages is
    # test_stacks_count_for_their_innermost_layer's.
    assert samples['framework'] > 0 and samples['driver'] > 0, good
    assert samples['pages'] + samples['templates'] > 0, good
    assert all(us[k] > 0 for k in ('framework', 'driver', 'database')), good


@pytest.mark.timeout(600)
def test_profile_table_and_charts(profile_run):
    _, out = profile_run
    md = (out / 'results.md').read_text()
    section = md.split('## Where the time goes\n')[1]
    for page in ('ugly', 'good'):
        table = section.split('### %s\n' % page)[1].split('\n### ')[0]
        lines = [x for x in table.splitlines() if x.startswith('| ')]
        header = [c.strip() for c in lines[0].split('|')[1:-1]]
        assert header[4:] == ['framework', 'pages', 'templates', 'driver',
                              'kernel', 'server total', 'database', 'total']
        row = [c.strip() for c in lines[2].split('|')[1:-1]]
        assert row[0] == PROFILE_ENGINE
        figures = [float(c) for c in row[4:]]
        assert sum(figures[:5]) == pytest.approx(figures[5], abs=0.3)
        assert figures[5] + figures[6] == pytest.approx(figures[7], abs=0.15)
        assert figures[5] > 0
        data = (out / ('chart-profile-%s.png' % page)).read_bytes()
        assert data[:8] == b'\x89PNG\r\n\x1a\n'
    assert '| ugly ÷ bare hello |' in md and '| hello-aiohttp |' in md


# --- --workers ----------------------------------------------------------------

@pytest.mark.bench
def test_workers_go_to_server_py():
    s = cli.plan(['--workers', '3', '--engines', 'aiohttp-tarantool-one',
                      '--out', '/nonexistent'])
    assert s.server_args[-2:] == ['--workers', '3'] and s.workers == 3
    assert [e.name for e in s.engines] == ['aiohttp-tarantool-one']
    assert '--workers' not in cli.plan(['--out', '/x']).server_args


@pytest.mark.bench
def test_database_passwords_stay_off_command_lines_and_results():
    s = cli.plan(['--tarantool', 'sticker_app:hush1@127.0.0.1:3301',
                      '--postgres', 'postgresql://a:hush2@127.0.0.1:5/db',
                      '--out', '/x'])
    assert s.server_env == {
        'STICKERS_TARANTOOL': 'sticker_app:hush1@127.0.0.1:3301',
        'STICKERS_POSTGRES': 'postgresql://a:hush2@127.0.0.1:5/db'}
    from bench.engine import EngineServer
    server = EngineServer('aiohttp-tarantool-one', 1, s.server_args, '/x',
                          env=s.server_env)
    assert 'hush' not in ' '.join(server.argv + s.server_args)
    assert server.env['STICKERS_TARANTOOL'].endswith('@127.0.0.1:3301')


def test_engines_take_no_database_address_from_the_shell(monkeypatch):
    """A database the shell names (STICKERS_REDIS) is not the bench's: its
    engines start their own local one, which --forget-visitors may empty;
    an address given to the bench reaches them."""
    from bench.engine import EngineServer
    monkeypatch.setenv('STICKERS_REDIS', 'redis://a:hush@127.0.0.1:6379/0')
    monkeypatch.setenv('STICKERS_TARANTOOL', 'a:hush@127.0.0.1:3301')
    monkeypatch.setenv('STICKERS_REDIS_PORT', '7001')
    server = EngineServer('aiohttp-redis-one', 1, [], '/x')
    assert 'STICKERS_REDIS' not in server.env
    assert 'STICKERS_TARANTOOL' not in server.env
    assert server.env['STICKERS_REDIS_PORT'] == '7001'
    assert server.env['PATH'] == os.environ['PATH']
    given = 'redis://b:hush3@127.0.0.1:6380/0'
    server = EngineServer('aiohttp-redis-one', 1, [], '/x',
                          env={'STICKERS_REDIS': given})
    assert server.env['STICKERS_REDIS'] == given
    assert 'STICKERS_TARANTOOL' not in server.env


@pytest.mark.bench
def test_a_given_database_is_emptied_of_visitors_only_when_asked():
    from runtime import engines
    from bench.runner import start_options
    redis, tarantool = (engines.BY_NAME[name] for name in (
        'aiohttp-redis-one', 'aiohttp-tarantool-one'))
    base = ['--redis', 'redis://a:hush@127.0.0.1:6380/0', '--out', '/x',
            '--engines', 'aiohttp-redis-one,aiohttp-tarantool-one']
    s = cli.plan(base)
    assert start_options(s, redis) == ['--snapshots-at-start']
    assert start_options(s, tarantool) == ['--forget-visitors',
                                           '--snapshots-at-start']
    assert '  given redis: engines on it start without --forget-visitors: ' \
        'its sessions and ballots stay (--forget-visitors-in-given removes ' \
        'them); the verification and the timed votes write into it' \
        in outline.lines(s, 0)
    s = cli.plan(base + ['--forget-visitors-in-given'])
    assert start_options(s, redis)[0] == '--forget-visitors'
    assert any(line.startswith(
        '  given redis: engines on it start with --forget-visitors '
        '(--forget-visitors-in-given)') for line in outline.lines(s, 0))
    s = cli.plan(['--out', '/x', '--engines', 'aiohttp-redis-one'])
    assert start_options(s, redis)[0] == '--forget-visitors'
    assert not any('given' in line for line in outline.lines(s, 0))


@pytest.mark.bench
def test_forgetting_in_given_databases_needs_one_given(capsys):
    with pytest.raises(SystemExit) as e:
        cli.plan(['--forget-visitors-in-given', '--out', '/x'])
    assert e.value.code == 2
    assert 'no database is given by address' in capsys.readouterr().err


def test_workers_get_the_last_cores_and_wrk_the_others(monkeypatch):
    monkeypatch.setattr(os, 'sched_getaffinity', lambda pid: set(range(8)))
    monkeypatch.setattr(shutil, 'which', lambda name: '/usr/bin/' + name)
    assert cli.pinning(False, 4) == {'server': ['taskset', '-c', '4,5,6,7'],
                                     'wrk': ['taskset', '-c', '0,1,2,3'],
                                     'databases': []}
    assert cli.pinning(False, 1) == {'server': ['taskset', '-c', '7'],
                                     'wrk': ['taskset', '-c', '0'],
                                     'databases': []}
    assert cli.pinning(False, 8) == {'server': [], 'wrk': [], 'databases': []}
    # --databases-apart: the databases on the load generator's cores
    assert cli.pinning(False, 1, apart=True)['databases'] == ['taskset', '-c', '0']
    assert cli.pinning(False, 8, apart=True)['databases'] == []


@pytest.mark.bench
def test_nginx_gets_as_many_worker_processes(tmp_path):
    from bench.nginx import Nginx
    config = open(Nginx(str(tmp_path), 1, None, workers=3).write_config()).read()
    assert 'master_process on;' in config and 'worker_processes 3;' in config
    config = open(Nginx(str(tmp_path), 1, None).write_config()).read()
    assert 'master_process off;' in config and 'worker_processes 1;' in config


@pytest.mark.timeout(600)
@pytest.mark.bench
def test_quick_run_with_workers_records_them(tarantool, tmp_path_factory):
    tools.need('wrk', 'nginx')
    _, out = quick_bench(tarantool, tmp_path_factory, '--workers', '2',
                         '--engines', 'aiohttp-tarantool-one', '--pages',
                         'ugly', '--plain')
    results = json.loads((out / 'results.json').read_text())
    assert results['settings']['workers'] == 2
    engine, hello_, nginx = results['targets']
    assert [t['status'] for t in results['targets']] == ['ok'] * 3
    assert engine['command'][-2:] == ['--workers', '2']
    assert 'worker_processes 2;' in (out / 'nginx' / 'nginx.conf').read_text()
    log = (out / engine['log']).read_text()
    assert 'from 2 workers' in log, log
    assert '- Processes: 2 per engine' in (out / 'results.md').read_text()


@pytest.mark.timeout(600)
@pytest.mark.bench
@pytest.mark.server
@pytest.mark.parametrize('framework', frameworks.NAMES)
def test_every_bare_hello_starts_and_answers(framework, tmp_path):
    from runtime import engines
    python = sys.executable
    if not frameworks.BY_NAME[framework].current:
        python = os.path.join(engines.LEGACY, 'bin', 'python')
        if not os.access(python, os.X_OK):
            pytest.skip('needs .venv37 (./run.sh setup with CPython 3.7)')
    server = references.HelloServer(framework, 'asyncio', free_port(),
                                    str(tmp_path / 'log'), (), python, 'hello')
    try:
        server.start(timeout=60)
        checks = verify.hello(server.url)
    finally:
        server.stop()
    assert verify.failure(checks) is None, checks


# --- one quick run on both of Tarantool's storage engines --------------------

def test_bad_tarantool_engines_exit_2(capsys):
    for argv, message in (
            (['--tarantool-engine', 'memtx,lmdb'], 'a list of memtx, vinyl'),
            (['--tarantool-engine', 'vinyl,vinyl'], 'each once'),
            (['--tarantool-engine', 'vinyl', '--tarantool', '127.0.0.1:3301'],
             'leave out one of them')):
        with pytest.raises(SystemExit) as e:
            cli.plan(argv + ['--engines', 'aiohttp-tarantool-one'])
        assert e.value.code == 2
        assert message in capsys.readouterr().err


def test_storage_labels():
    from bench import storage
    assert storage.label('a-tarantool-one', 'memtx', ['memtx']) == 'a-tarantool-one'
    assert storage.label('a-tarantool-one', 'vinyl', ['vinyl']) == \
        'a-tarantool-one (vinyl)'
    assert storage.untag('a-tarantool-one (vinyl)@3.12') == 'a-tarantool-one@3.12'
    assert storage.storage_of('a-tarantool-one (memtx)@3.12') == 'memtx'
    assert storage.storage_of('a-tarantool-one@3.12') is None


@pytest.mark.timeout(600)
@pytest.mark.bench
def test_a_run_on_memtx_and_vinyl_has_both_rows(bare_checkout, tmp_path):
    """Each engine on the local Tarantool of each storage engine (a copy
    of the checkout's, on ports of their own), in turns, rows side by side,
    recorded per run."""
    tools.need('wrk')
    out = tmp_path / 'out'
    env = dict(os.environ, STICKERS_TARANTOOL_PORT=str(free_port()),
               STICKERS_TARANTOOL_VINYL_PORT=str(free_port()))
    done = subprocess.run(
        [sys.executable, 'bench.py', '--quick', '--plain', '--warmup', '0',
         '--tarantool-engine', 'memtx,vinyl', '--engines',
         'aiohttp-tarantool-one', '--pages', 'ugly,good',
         '--packs', str(TEST_PACKS), '--port', str(free_port()),
         '--out', str(out)], cwd=bare_checkout, capture_output=True, text=True,
        timeout=240, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((out / 'results.json').read_text())
    assert results['settings']['storages'] == ['memtx', 'vinyl']
    names = ['aiohttp-tarantool-one (memtx)', 'aiohttp-tarantool-one (vinyl)']
    status = {t['name']: t for t in results['targets']}
    for name, storage in zip(names, ('memtx', 'vinyl')):
        assert status[name]['status'] == 'ok', status[name]
        assert status[name]['storage'] == storage
        assert ('--tarantool-engine', storage) == tuple(
            status[name]['command'][-2:])
    good = [(r['target'], r['storage']) for r in results['runs']
            if r['page'] == 'good']
    assert good == list(zip(names, ('memtx', 'vinyl')))
    md = (out / 'results.md').read_text()
    section = md.split('### good · plain\n')[1].split('\n## ')[0]
    rows = [line.split('|')[1].strip() for line in section.splitlines()
            if line.startswith('| aiohttp-')]
    assert rows == names
    assert 'vinyl ÷ memtx' in section.splitlines()[1]
    # The ugly runs of both took turns with one bare hello.
    ugly = [r['target'] for r in results['runs']
            if r['page'] == 'ugly' and r['target'] != 'nginx']
    assert ugly == [names[0], 'hello-aiohttp', names[1], 'hello-aiohttp']


@pytest.mark.parametrize('argv, message', [
    (['--instructions', '--pages', 'vote'], 'unknown pages vote'),
    (['--instructions', '--workers', '2'], 'counts one process'),
    (['--instructions', '--plain'], 'leave out --plain'),
    (['--instructions', '--requests', '250,50'], 'N1,N2: 0 <= N1 < N2'),
])
def test_bad_instruction_arguments_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        cli.plan(argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.bench
@pytest.mark.parametrize('argv', [
    ['bench.py', '--instructions', '--engines', 'aiohttp-tarantool-one-uvloop'],
    ['-m', 'bench.instructions', '--check'],
])
def test_instructions_without_valgrind_exit_2(argv):
    """A PATH without valgrind: a clear message, exit 2."""
    empty = tempfile.mkdtemp()
    for tool in ('git', 'tarantool'):       # what describe() and the engines ask
        if shutil.which(tool):
            os.symlink(shutil.which(tool), os.path.join(empty, tool))
    done = subprocess.run([sys.executable] + argv, cwd=ROOT, capture_output=True,
                          text=True, env=dict(os.environ, PATH=empty))
    assert done.returncode == 2, done.stderr
    assert 'valgrind is not installed' in done.stderr


# --- start time and memory ---------------------------------------------------

@pytest.mark.bench
def test_tree_rss_adds_a_child_and_leaves_out_what_it_is_told():
    from bench import memory
    me = os.getpid()
    alone = memory.tree_rss_kib(me)
    assert alone >= memory.rss_kib(me) > 5 * 1024
    child = subprocess.Popen(
        [sys.executable, '-c', 'import sys; b = b"x" * (64 << 20); '
         'print("ready", flush=True); sys.stdin.read()'],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline() == b'ready\n'
        own = memory.rss_kib(child.pid)
        assert own > 64 * 1024
        assert memory.tree_rss_kib(me) - alone > own * 0.9
        assert abs(memory.tree_rss_kib(me, [child.pid]) - alone) < own * 0.1
        assert child.pid in memory.tree(me)
    finally:
        child.kill()
        child.wait()
    assert memory.rss_kib(child.pid) is None
    assert memory.tree_rss_kib(child.pid) is None


def plausible_memory(t, database):
    """The start and memory figures of a target record are in range."""
    m = t['memory']
    assert 0 < t['start_s'] < 60, t
    assert 5 * 1024 < m['server_rest_kib'] < 2 * 1024 ** 2, m
    assert m['server_peak_kib'] >= m['server_rest_kib'] * 0.5, m
    assert m['idle_connections'] == 1000, m
    assert 0 <= m['per_connection_kib'] < 1024, m
    if database:
        assert m['database_pids'] and m['database_rest_kib'] > 1024, m
        assert m['database_peak_kib'] >= m['database_rest_kib'] * 0.5, m
    else:
        assert m['database_pids'] is None and m['database_rest_kib'] is None


@pytest.mark.timeout(600)
@pytest.mark.bench
@pytest.mark.db
def test_a_database_the_shell_names_keeps_its_visitors(bare_checkout,
                                                       tmp_path):
    """STICKERS_TARANTOOL in the shell, no --tarantool: the bench's engine
    runs on a local Tarantool of its own, and the shell's keeps its
    sessions, ballots and votes."""
    import asyncio
    import secrets
    import uuid
    from data_interface import Visit
    from data_interface.tarantool.asynctnt_data import AsynctntData
    from plugins.databases import loaded_tarantool
    theirs = loaded_tarantool(str(tmp_path / 'theirs'), 'memtx')

    async def visitors(make=0):
        data = AsynctntData(tarantool_address(theirs))
        await data.start()
        try:
            sessions = [str(uuid.uuid4()) for _ in range(make)]
            await data.record_visits([Visit(session, '127.0.0.1', 'pytest')
                                      for session in sessions])
            for session in sessions:
                await data.sticker_pair(session, (
                    secrets.token_urlsafe(16), secrets.token_urlsafe(16)), 600)
            stats = await data.stats()
            return stats.sessions, stats.ballots, stats.votes
        finally:
            await data.close()
    try:
        before = asyncio.run(visitors(make=4))
        assert before[0] >= 4 and before[1] >= 8
        address = tarantool_address(theirs)
        env = dict(os.environ, STICKERS_TARANTOOL='%s:%s@%s:%d' % (
            address.user, address.password, address.host, address.port),
            STICKERS_TARANTOOL_PORT=str(free_port()),
            STICKERS_TARANTOOL_VINYL_PORT=str(free_port()))
        out = tmp_path / 'out'
        done = subprocess.run(
            [sys.executable, 'bench.py', '--quick', '--plain', '--warmup', '0',
             '--engines', 'aiohttp-tarantool-one', '--pages', 'good',
             '--packs', str(TEST_PACKS), '--port', str(free_port()),
             '--out', str(out)],
            cwd=bare_checkout, capture_output=True, text=True, timeout=300,
            env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert 'given' not in done.stderr
        after = asyncio.run(visitors())
        assert after == before
    finally:
        theirs.stop()


def local_run(checkout, out, engine, *options):
    """bench.py --quick of `engine`'s /ugly in `checkout`, on the Tarantool
    its server.py starts there (on ports of its own): (the finished run,
    its environment, its results)."""
    tools.need('wrk', 'nginx')
    env = dict(os.environ, STICKERS_TARANTOOL_PORT=str(free_port()),
               STICKERS_TARANTOOL_VINYL_PORT=str(free_port()))
    done = subprocess.run(
        [sys.executable, 'bench.py', '--quick', '--plain', '--warmup', '0',
         '--engines', engine, '--pages', 'ugly', '--packs', str(TEST_PACKS),
         '--port', str(free_port()), '--out', str(out)] + list(options),
        cwd=checkout, capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done, env, json.loads((out / 'results.json').read_text())


@pytest.mark.timeout(600)
@pytest.mark.bench
def test_start_and_memory_of_an_engine_on_a_local_database(bare_checkout,
                                                           tmp_path):
    """The engine's own Tarantool (started by its server.py) is measured
    apart from the server: the start is a second server.py's, the RSS of
    the server's tree leaves the database out."""
    out = tmp_path / 'out'
    engine = 'aiohttp-tarantool-one-uvloop'
    done, env, results = local_run(bare_checkout, out, engine)
    status = {t['name']: t for t in results['targets']}
    plausible_memory(status[engine], database=True)
    plausible_memory(status['hello-aiohttp-uvloop'], database=False)
    plausible_memory(status['nginx'], database=False)
    m = status[engine]['memory']
    # The server's tree (its Tarantool is its child) without the database.
    assert m['server_rest_kib'] < status['hello-aiohttp-uvloop']['memory'][
        'server_rest_kib'] + m['database_rest_kib'] / 2
    # PSS too (smaps_rollup): shared pages once, never above the RSS
    for part in ('server', 'database'):
        pss = m[part + '_peak_pss_kib']
        assert 1024 < pss <= m[part + '_peak_kib'] * 1.05, m
    assert (out / 'logs' / (engine + '-second-start.log')).is_file()
    assert re.search(r'^%s: start [\d.]+ s, RSS [\d.]+ MiB at rest' % engine,
                     done.stderr, re.M), done.stderr
    md = (out / 'results.md').read_text()
    section = md.split('## Start and memory\n')[1].split('\n## ')[0]
    row = re.search(r'^\| %s \| ([\d.]+) \| ([\d.]+) \|' % engine, section,
                    re.M)
    assert row and float(row.group(1)) == round(status[engine]['start_s'], 2)
    assert float(row.group(2)) == round(m['server_rest_kib'] / 1024, 1)
    assert 'Start and memory' in (out / 'results.html').read_text()
    # The engine started without the sessions its database held; its second
    # start kept the ones the first made (verifying it), and so the next
    # engine to start forgets them.
    forgot = re.compile(r'forgot (\d+) sessions and (\d+) ballots')
    command = status[engine]['command']
    assert command[command.index('-p') + 2:][:2] == [
        '--forget-visitors', '--snapshots-at-start']
    assert forgot.findall((out / 'logs' / (engine + '.log')).read_text())
    assert not forgot.search(
        (out / 'logs' / (engine + '-second-start.log')).read_text())
    from bench.engine import EngineServer
    log = tmp_path / 'next.log'
    nxt = EngineServer(engine, free_port(), ['--forget-visitors', '--packs',
                                             str(TEST_PACKS)],
                       str(log), env=env, root=str(bare_checkout))
    try:
        nxt.start(timeout=120)
    finally:
        nxt.stop()
    sessions, ballots = map(int, forgot.search(log.read_text()).groups())
    assert sessions >= 1 and ballots >= 0


def test_instructions_table_gives_the_bare_hello_over_the_sites_ugly():
    from bench import instructions
    records = [{'engine': e, 'page': p, 'path': '/' + p, 'per_request': n,
                'n1': 50, 'n2': 250, 'spread': 0.5, 'parts': {'interpreter': n}}
               for e, p, n in [('aiohttp-tarantool-one-uvloop', 'ugly', 200000),
                               ('aiohttp-tarantool-one-uvloop', 'good', 500000),
                               ('hello-aiohttp-uvloop', 'ugly', 170000)]]
    lines = instructions.section({'instructions': records})
    table = [line.split(' | ') for line in lines if line.startswith('| ')]
    column = table[0].index('hello ÷ this')
    ratio = {(row[0].strip('| '), row[1]): row[column] for row in table[2:]}
    assert ratio == {('aiohttp-tarantool-one-uvloop', 'ugly'): '0.85',
                     ('aiohttp-tarantool-one-uvloop', 'good'): '–',
                     ('hello-aiohttp-uvloop', 'ugly'): '–'}


def test_results_json_keeps_a_line_per_record():
    from bench.runner import record_lines
    results = {'settings': {'runs': 3, 'pages': ['good']}, 'runs': [
        {'target': 'a', 'rps': 1.5}, {'target': 'b', 'rps': None}],
        'capacity': []}
    text = record_lines(results)
    assert json.loads(text) == results
    lines = text.splitlines()
    assert '{"target":"a","rps":1.5},' in lines     # compact: no spaces
    assert '{"target":"b","rps":null}' in lines


@pytest.mark.bench
def test_databases_apart_needs_pinning(capsys):
    with pytest.raises(SystemExit) as e:
        cli.plan(['--databases-apart', '--no-pin', '--engines',
                  'aiohttp-tarantool-one-uvloop'])
    assert e.value.code == 2
    assert '--databases-apart pins the databases apart' in capsys.readouterr().err


@pytest.mark.bench
def test_a_database_tree_is_moved_to_the_cores_named(tmp_path):
    """pin_tree moves a process, every thread of it, and its children
    (PostgreSQL's backends) to the cores named, and says where each may
    run now; the share of the server's core leaves out a database that
    ran apart."""
    from bench.latency import demand
    from bench.runner import allowed, pin_tree
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip('one usable core')
    first, last = str(cores[0]), str(cores[-1])
    parent = subprocess.Popen(
        ['taskset', '-c', last, sys.executable, '-c',
         'import subprocess, sys, threading, time\n'
         'threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n'
         'c = subprocess.Popen(["sleep", "60"])\n'
         'print(c.pid, flush=True)\n'
         'sys.stdin.read()\n'],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        assert allowed(parent.pid) == allowed(child) == last
        found = pin_tree([parent.pid], ['taskset', '-c', first])
        assert found == {parent.pid: first, child: first}
        threads = os.listdir('/proc/%d/task' % parent.pid)
        assert len(threads) >= 2
        for tid in threads:
            with open('/proc/%d/task/%s/status' % (parent.pid, tid)) as f:
                assert 'Cpus_allowed_list:\t%s\n' % first in f.read()
    finally:
        parent.kill()
        parent.wait()
        subprocess.run(['pkill', '-P', str(parent.pid)])
    point = {'cpu_s': {'server': 0.5, 'database': 0.3}, 'oha': {'seconds': 1.0}}
    assert demand.share(point) == 0.8
    point['cpu_s']['database_apart'] = True
    assert demand.share(point) == 0.5
    # a point counts its database apart only where the run moved it (one
    # given by address stays where it is)
    from types import SimpleNamespace
    from bench.latency.fixed_rate import apart
    matrix = SimpleNamespace(results={'targets': [
        {'name': 'moved', 'databases_on': [first]},
        {'name': 'given', 'databases_on': []}, {'name': 'plain'}]})
    assert [apart(matrix, n) for n in ('moved', 'given', 'plain')] == [
        True, False, False]


@pytest.mark.timeout(600)
@pytest.mark.bench
def test_the_databases_a_run_starts_run_apart_when_asked(bare_checkout,
                                                         tmp_path):
    """--databases-apart: the engine's own Tarantool runs on the load
    generator's core, as its record and results.md say."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip('one usable core')
    out = tmp_path / 'out'
    engine = 'aiohttp-tarantool-one-uvloop'
    _, _, results = local_run(bare_checkout, out, engine, '--databases-apart')
    pin = results['pinning']
    assert pin['databases'] == pin['wrk'] != pin['server']
    wrk_cores = pin['wrk'].split()[-1]
    [t] = [t for t in results['targets'] if t['name'] == engine]
    assert t['databases_on'] == [wrk_cores], t
    assert 'the databases on `%s`' % pin['wrk'] in (out / 'results.md').read_text()


@pytest.mark.timeout(600)
@pytest.mark.bench
def test_mix_cpu_apart_runs_the_databases_on_the_load_generator_s_core(
        bare_checkout):
    """bench.mix_cpu --apart: the server on the last core, the Tarantool
    its server.py starts on the first (the layout of --databases-apart),
    and a CPU figure per mix request from its run."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip('one usable core')
    env = dict(os.environ, STICKERS_TARANTOOL_PORT=str(free_port()))
    done = subprocess.run(
        [sys.executable, '-m', 'bench.mix_cpu', '--engines',
         'aiohttp-tarantool-one-uvloop', '--rate', '40', '--duration', '2',
         '--runs', '1', '--warmup', '0', '--packs', str(TEST_PACKS),
         '--apart'], cwd=bare_checkout, capture_output=True, text=True,
        timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    line = re.search(r'^aiohttp-tarantool-one-uvloop +(\d+) us per mix '
                     r'request at 40/s \(runs: \d+\) \(its databases on CPU '
                     r'(\S+)\)$', done.stdout, re.M)
    assert line, done.stdout
    assert int(line.group(1)) > 0
    assert line.group(2) == str(cores[0])


def test_mix_cpu_rounds_pair_each_engine_with_the_first_of_its_round():
    """bench.mix_cpu --rounds: an engine's ratio is the median of the
    rounds' ratios, each of its round's medians, so that a host twice as
    slow in one round moves both engines alike; its figure pools every
    run."""
    from bench.mix_cpu import pooled

    def row(engine, runs):
        return {'engine': engine, 'rate': 100, 'per_request_us': runs,
                'median_us': 0, 'databases_on': None}
    rounds = [[row('a', [100, 104]), row('b', [120, 124])],
              [row('a', [200]), row('b', [260])],
              [row('a', [100]), row('b', [110])]]
    a, b = pooled(rounds)
    assert a['ratio'] == 1 and a['per_request_us'] == [100, 104, 200, 100]
    assert b['ratios'] == pytest.approx([122 / 102, 1.3, 1.1])
    assert b['ratio'] == pytest.approx(122 / 102)
    assert b['median_us'] == 122


@pytest.mark.parametrize('option', ['--rounds', '--runs'])
def test_mix_cpu_refuses_no_round_or_run(option, capsys):
    from bench.mix_cpu import main
    with pytest.raises(SystemExit) as e:
        main([option, '0'])
    assert e.value.code == 2
    assert 'must be at least 1' in capsys.readouterr().err
