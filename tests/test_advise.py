"""bench.py advise: cores, cost and ranking from a --latency run's
capacities, on a small results.json shaped like bench.py's, and on the
committed runs."""
import json
import os
import re
import runpy
import sys

import pytest

from bench import advise, results_file
from bench.latency.cells import capacities

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLO = {'percentile': 'p99', 'ms': 10.0}


def capacity(target, page, run, rate, pair=None):
    return {'rate': rate, 'open': False, 'missed_at': rate * 1.05, 'target': target,
            'page': page, 'run': run, 'saturation': rate * 1.5, 'slo': SLO,
            'pair': pair}


def point(target, page, run, rate, p99, label='probe'):
    """A fixed-rate record as fixed_rate.point writes it (oha's report)."""
    report = {'seconds': 3.0, 'requests': int(rate * 3), 'achieved': rate,
              'ok': int(rate * 3), 'non2xx': 0, 'status': {'200': int(rate * 3)},
              'errors': {}, 'timeouts': 0, 'offered': rate,
              'latency_ms': {'p50': p99 / 4, 'p90': p99 / 2, 'p99': p99,
                             'p99.9': p99 * 1.5, 'max': p99 * 2}}
    return {'offered': rate, 'oha': report, 'target': target, 'page': page,
            'run': run, 'rate': label, 'pair': None, 'python': '3.11.7',
            'miss': None if p99 <= 10 else 'p99 %s ms' % p99, 'kept': p99 <= 10,
            'headroom': True}


# Capacities (requests/s of good) of each engine's three runs.
CAPACITY = {'a-tarantool-one': (3900.0, 4000.0, 4100.0),
            'b-postgres-pool': (2400.0, 2500.0, 2600.0),
            'c-tarantool-one': (5000.0, 5000.0, 5000.0),
            'd-tarantool-one': (4500.0, 4500.0, 4500.0)}
# a-tarantool-one's fixed-rate points (rate, p99 ms), the same each run.
POINTS = [(1000.0, 2.0), (2000.0, 4.0), (3000.0, 8.0), (4000.0, 9.5), (4500.0, 30.0)]


def results(workers=1, latency=True):
    names = list(CAPACITY) + ['hello-a', 'nginx']
    kinds = {'hello-a': 'hello', 'nginx': 'nginx'}
    found = {
        'started': '2026-11-24T23:47:35+0000',
        'settings': {'pages': ['good'], 'workers': workers, 'connections': 100,
                     'latency': {'generator': 'oha 1.16.0', 'rates': None,
                                 'fractions': [0.25, 0.5, 0.75, 0.9], 'slo': SLO,
                                 'probes': 3} if latency else False},
        'targets': [{'name': n, 'kind': kinds.get(n, 'engine'), 'status': 'ok'}
                    for n in names],
        'runs': [], 'latency': [], 'capacity': [],
        'source': {'commit': 'd24a6fd7d7e86163820d1f70890d4029f0b7da86',
                   'modified': False}}
    if latency:
        for run in (1, 2, 3):
            for name, rates in CAPACITY.items():
                found['capacity'].append(capacity(name, 'good', run, rates[run - 1]))
            found['capacity'].append(capacity('hello-a', 'ugly', run, 99999.0, 'a'))
            found['capacity'].append(capacity('nginx', 'good', run, 99999.0))
            for rate, p99 in POINTS:
                found['latency'].append(point('a-tarantool-one', 'good', run, rate, p99))
    return found


@pytest.fixture
def run(tmp_path, capsys):
    """advise's main on a results.json written in tmp_path: (exit status,
    stdout, stderr)."""
    def go(args, data=None):
        path = tmp_path / 'results.json'
        path.write_text(json.dumps(results() if data is None else data))
        status = advise.main([str(path) if a == 'RESULTS' else a for a in args])
        out, err = capsys.readouterr()
        return status, out, err
    return go


def columns(out):
    """{engine: {column: text}} of the table and its numbered notes, in
    order."""
    table, notes = out.split('\n\nstack ', 1)[1].split('\n\n', 1)
    found = {}
    for line in table.splitlines()[1:]:
        name, cores, monthly, first, basis = re.split(r'\s{2,}', line.strip())
        basis, number = re.match(r'(\w+) \[(\d+)\]$', basis).groups()
        found[number] = {'engine': name, 'cores': cores, 'monthly $': monthly,
                         'first limit': first, 'basis': basis}
    for block in re.split(r'\n(?=\[\d+\] )', notes.strip('\n')):
        assert all(len(line) <= 120 for line in block.splitlines())
        said = ' '.join(line.strip() for line in block.splitlines())
        number, name, per_core, database, million, memory, said = re.match(
            r'\[(\d+)\] (\S+): capacity/core (\S+); database (.+?); '
            r'\$/M requests at [\d,]+/s (\S+); memory (.+?) Notes: (.*)$', said).groups()
        assert found[number]['engine'] == name
        found[number].update({'capacity/core': per_core, 'database': database,
                              '$/M requests': million, 'memory': memory,
                              'notes': said})
    return {c['engine']: c for c in found.values()}


def flat(out):
    """The text with its wrapped lines joined."""
    return ' '.join(line.strip() for line in out.splitlines())


def rows(out):
    """{engine: [engine, capacity/core, cores, monthly $, $/M requests,
    memory, notes]} of the table, in order."""
    keep = ('engine', 'capacity/core', 'cores', 'monthly $', '$/M requests',
            'memory', 'notes')
    return {name: [c[k] for k in keep] for name, c in columns(out).items()}


def test_cores_cost_and_cost_per_million(run):
    status, out, err = run(['RESULTS', '--rate', '10000', '--workload', 'good',
                            '--core-hour-price', '0.05'])
    assert status == 0 and err == ''
    a = rows(out)['a-tarantool-one']
    # median capacity 4,000/s on one core, each core at 80 % of it:
    # ceil(10000 / 3200) = 4 cores
    assert a[1:4] == ['4,000', '4', '%.2f' % (4 * 730 * 0.05)]
    # 4 cores x $0.05/h over 10,000 x 3600 requests an hour
    assert float(a[4]) == pytest.approx(4 * 0.05 / 36000000 * 1e6, abs=1e-4)
    assert a[5] == 'not measured'
    assert 'x 730 h x $0.05 per core-hour' in out
    assert 'Memory: not measured' in out


def test_memory_is_the_cores_servers_and_their_database(run):
    data = results()
    a = data['targets'][0]
    assert a['name'] == 'a-tarantool-one'
    a['memory'] = {'server_rest_kib': 40 * 1024, 'server_peak_kib': 60 * 1024,
                   'database_rest_kib': 290 * 1024,
                   'database_peak_kib': 300 * 1024}
    out = run(['RESULTS', '--rate', '10000', '--workload', 'good'], data)[1]
    # 4 cores: 4 server processes of 60 MiB after load, and 300 MiB of database
    assert rows(out)['a-tarantool-one'][5] == '540 MiB'
    assert rows(out)['b-postgres-pool'][5] == 'not measured'
    assert "Memory: the site's server processes (one a core)" in flat(out)
    data['settings']['workers'] = 2     # the run's RSS was of 2 processes
    data['capacity'] = [dict(c, rate=c['rate'] * 2) for c in data['capacity']]
    out = run(['RESULTS', '--rate', '10000', '--workload', 'good'], data)[1]
    assert rows(out)['a-tarantool-one'][5] == '420 MiB'     # 4 x 30 + 300


def test_default_price_is_stated_as_an_assumption(run):
    out = run(['RESULTS', '--rate', '10000', '--workload', 'good'])[1]
    assert '$0.04 per core-hour (an assumed on-demand vCPU price)' in out
    assert rows(out)['b-postgres-pool'][2:4] == ['5', '%.2f' % (5 * 730 * 0.04)]


def test_ranked_by_cores_then_capacity_engines_only(run):
    out = run(['RESULTS', '--rate', '10000', '--workload', 'good'])[1]
    table = rows(out)
    # at 80 % of each capacity: c and d 3 cores, c the higher capacity;
    # a 4; b 5
    assert list(table) == ['c-tarantool-one', 'd-tarantool-one',
                           'a-tarantool-one', 'b-postgres-pool']
    assert [r[2] for r in table.values()] == ['3', '3', '4', '5']


def test_more_cores_are_marked_modelled_on_one_process(run):
    out = run(['RESULTS', '--rate', '10000', '--workload', 'good'])[1]
    assert 'assumed to scale linearly, NOT measured' in out
    assert all('modelled: linear from 1 core' in r[6] for r in rows(out).values())
    assert {c['basis'] for c in columns(out).values()} == {'modelled'}
    # 3,000/s within every capacity but b's: that is what the run measured
    out = run(['RESULTS', '--rate', '3000', '--workload', 'good'])[1]
    c = columns(out)['c-tarantool-one']
    assert [c['cores'], c['basis'], c['first limit']] == [
        '1', 'measured', 'measured to 5,000/s']
    assert 'measured: the run served 5,000/s within the budget on 1 core' in c['notes']
    b = columns(out)['b-postgres-pool']
    assert [b['cores'], b['basis']] == ['2', 'modelled']
    assert 'modelled: linear from 1 core' in b['notes']


def test_a_run_with_workers_gives_capacity_per_core_measured(run):
    out = run(['RESULTS', '--rate', '3000', '--workload', 'good'],
              results(workers=4))[1]
    a = rows(out)['a-tarantool-one']
    # 3,000/s within the 4,000/s the run served on its 4 cores: those 4
    assert a[1:3] == ['1,000', '4'] and 'within the budget on 4 cores' in a[6]
    assert 'measured with 4 server processes per engine' in out
    assert 'NOT measured' not in out
    out = run(['RESULTS', '--rate', '10000', '--workload', 'good'],
              results(workers=4))[1]
    assert 'modelled: linear from 4 cores' in rows(out)['a-tarantool-one'][6]


def test_another_budget_is_read_from_the_fixed_rate_points(run):
    status, out, _ = run(['RESULTS', '--rate', '10000', '--workload', 'good',
                          '--slo', 'p99=5ms'])
    assert status == 0
    # p99 4 ms at 2,000/s, 8 ms at 3,000/s: 2,000/s within 5 ms; at 80 %
    # of it, ceil(10,000 / 1,600) = 7 cores
    assert rows(out)['a-tarantool-one'][1:3] == ['2,000', '7']
    assert 'not searched at p99 ≤ 5 ms itself' in flat(out)
    # within 50 ms every rate tried kept it: at least 4,500/s
    out = run(['RESULTS', '--rate', '10000', '--workload', 'good',
               '--slo', 'p99=50ms'])[1]
    a = rows(out)['a-tarantool-one']
    assert a[1] == '4,500' and 'capacity at least this' in a[6]


def test_a_search_stopped_by_a_slow_host_is_said(run):
    """Searches that stopped at a rate missed only on a slow host (every
    try): advise notes them, under the run's budget and another one, and
    results.md marks the cell."""
    data = results()
    for c in data['capacity']:
        c['host'] = c['target'] == 'a-tarantool-one' and c['run'] < 3
    for r in data['latency']:      # a-tarantool-one's 4,500/s missed
        r['host'] = {'bursts': 500, 'slow_pct': 3.0, 'longest_ms': 60,
                     'slow': r['offered'] == 4500.0 and r['run'] < 3}
    out = run(['RESULTS', '--rate', '10000', '--workload', 'good'], data)[1]
    notes = rows(out)['a-tarantool-one'][6]
    assert '2 of 3 searches stopped where only a slow host missed' in notes
    assert 'slow host' not in rows(out)['b-postgres-pool'][6]
    out = run(['RESULTS', '--rate', '10000', '--workload', 'good',
               '--slo', 'p99=20ms'], data)[1]
    assert '2 of 3 searches stopped where only a slow host missed' in (
        rows(out)['a-tarantool-one'][6])
    from bench.latency import report
    table = '\n'.join(report.capacity_table(data, list(CAPACITY), ['good']))
    assert '| a-tarantool-one | 4,000 (3,900–4,100) (0.67) ⚠ |' in table, table
    assert ('⚠ searches that stopped at a rate missed only while the host ran '
            'slow, at every try (the host watch; on a steady host the '
            'capacity may be higher): a-tarantool-one good (2 of 3 searches)'
            ) in table
    data['capacity'] = [c for c in data['capacity'] if c['run'] == 1]
    table = '\n'.join(report.capacity_table(data, list(CAPACITY), ['good']))
    assert ('(the host watch; on a steady host the capacity may be higher): '
            'a-tarantool-one good\n') in table + '\n'
    assert 'b-postgres-pool good' not in table
    # a noisy cell: its own note, with each engine named once
    data = results()
    for c in data['capacity']:
        if c['target'] == 'b-postgres-pool':
            c['rate'] *= c['run']
    table = '\n'.join(report.capacity_table(data, list(CAPACITY), ['good']))
    assert ('⚠ cells whose runs\' capacities differ by more than 25%: '
            'b-postgres-pool good\n') in table + '\n', table


def test_a_cell_that_kept_no_rate_says_below_what():
    """Searches that missed even at their lowest rate: '< N', N the highest
    rate one of them missed at, not a capacity of 0."""
    from bench.latency import report
    data = results()
    for c in data['capacity']:
        if c['target'] == 'b-postgres-pool':
            c.update(rate=0.0, missed_at=100.0 * c['run'])   # 100, 200, 300
    table = '\n'.join(report.capacity_table(data, list(CAPACITY), ['good']))
    assert '| b-postgres-pool | < 300 (< 0.08) |' in table, table
    assert '"<" where even the lowest missed' in table
    [third] = [c for c in data['capacity']
               if c['target'] == 'b-postgres-pool' and c['run'] == 3]
    third['rate'] = 250.0     # one kept a rate: a spread
    table = '\n'.join(report.capacity_table(data, list(CAPACITY), ['good']))
    assert '| b-postgres-pool | 0 (0–250) (0.00) ⚠ |' in table, table


def test_another_budget_without_points_is_refused(run):
    data = results()
    data['latency'] = []
    status, out, err = run(['RESULTS', '--rate', '100', '--workload', 'good',
                            '--slo', 'p99=5ms'], data)
    assert status == 2 and out == ''
    assert err == ('bench.py advise: error: capacity within p99 ≤ 5 ms was not '
                   'measured: the run searched at p99 ≤ 10 ms and holds no '
                   'fixed-rate points of good to read it from\n')


@pytest.mark.parametrize('args, data, status, message', [
    (['/no/such/results', '--rate', '100'], None, 2, 'cannot read results: '),
    (['RESULTS', '--rate', '100'], results(latency=False), 2,
     'no latency data in these results'),
    (['RESULTS', '--rate', '100', '--workload', 'mix'], None, 2,
     "no capacity for workload 'mix' in these results; present: good"),
    (['RESULTS', '--rate', 'many'], None, 2, "--rate: 'many' is not a number"),
    (['RESULTS', '--rate', '0'], None, 2, '--rate must be above zero'),
    (['RESULTS', '--rate', '-3'], None, 2, '--rate must be above zero'),
    (['RESULTS', '--rate', '1e-9'], None, 2,
     '--rate must be at least 1 request/s (got 1e-9)'),
    (['RESULTS', '--rate', 'inf'], None, 2, '--rate must be a finite number (got inf)'),
    (['RESULTS', '--rate', 'nan'], None, 2, '--rate must be a finite number (got nan)'),
    (['RESULTS', '--rate', '1e12'], None, 2,
     '--rate must be at most 10,000,000 (got 1e12)'),
    (['RESULTS', '--rate', '100', '--slo', 'p99=1ms', '--workload', 'good'], None, 2,
     'capacity within p99 ≤ 1 ms was not measured: no rate the run tried kept '
     'it (it searched at p99 ≤ 10 ms)'),
    (['RESULTS', '--rate', '100000', '--workload', 'good', '--max-cores', '1'],
     None, 1, 'no engine serves 100,000 requests/s of good within p99 ≤ 10 ms '
     'on at most 1 core ('),
    (['RESULTS', '--rate', '100', '--max-cores', '0.5'], None, 2,
     '--max-cores must be at least 1 (got 0.5)'),
    (['RESULTS', '--rate', '100', '--slo', 'p42=3ms'], None, 2,
     '--slo: percentile p42: choose from p50, p90, p99, p99.9, max'),
    (['RESULTS', '--rate', '1000000', '--workload', 'good'], None, 1,
     'no engine serves 1,000,000 requests/s of good within p99 ≤ 10 ms on at '
     'most 64 cores (c-tarantool-one would need 250)'),
])
def test_errors_are_one_line_with_an_exit_status(run, args, data, status, message):
    done, out, err = run(args, data)
    assert done == status and out == ''
    assert err.startswith('bench.py advise: error: ' + message)
    assert err.count('\n') == 1 and 'Traceback' not in err


def test_unreadable_results_are_refused(run, tmp_path):
    (tmp_path / 'broken.json').write_text('{"settings": ')
    status, out, err = run([str(tmp_path / 'broken.json'), '--rate', '100'])
    assert status == 2 and err.startswith('bench.py advise: error: cannot read results')


def committed():
    """[(path, results)] of the runs under docs/ with capacities, the main
    committed run (docs/results) last."""
    found = []
    for name in sorted(os.listdir(os.path.join(ROOT, 'docs')),
                       key=lambda n: (n == 'results', n)):
        folder = os.path.join(ROOT, 'docs', name)
        path = results_file.path(folder) if os.path.isdir(folder) else ''
        if os.path.exists(path):
            data = results_file.load(path)
            if data.get('capacity'):
                found.append((path, data))
    return found


def test_advise_ranks_every_engine_of_a_committed_latency_run(capsys, monkeypatch):
    path, data = committed()[-1]
    folder = os.path.dirname(path)
    engines = {t['name'] for t in data['targets'] if t['kind'] == 'engine'}
    pages = {p for (_, p) in capacities(data)}
    assert pages
    for page in sorted(pages):      # the pages offered fixed rates
        measured = {n for (n, p) in capacities(data) if p == page and n in engines}
        # a rate some stack reaches within --max-cores (a page the run
        # searched on slow stacks alone would have none at 10,000/s)
        best = max(c['rate']['median'] or 0 for (n, p), c in
                   capacities(data).items() if p == page)
        rate = str(int(min(10000, 8 * best)))
        # through bench.py's command line, as a folder
        monkeypatch.setattr(sys, 'argv', ['bench.py', 'advise', folder,
                                          '--rate', rate, '--workload', page])
        with pytest.raises(SystemExit) as done:
            runpy.run_path(os.path.join(ROOT, 'bench.py'), run_name='__main__')
        out = capsys.readouterr().out
        assert done.value.code == 0 and measured
        table = rows(out)
        assert set(table) == measured
        # rows that fit in --max-cores first, by cores; then those that do not
        fits = [r[2] != '–' for r in table.values()]
        assert fits == sorted(fits, reverse=True) and any(fits)
        cores = [int(r[2]) for r in table.values() if r[2] != '–']
        assert cores == sorted(cores) and all(c >= 1 for c in cores)
        for r in table.values():
            if r[2] == '–':
                assert ('more than --max-cores' in r[6] or 'no rate' in r[6]
                        or 'shard the writes' in r[6]
                        or "not the votes' applies" in r[6]
                        or "of the disk's" in r[6]), r


def test_the_mix_is_the_default_workload_when_the_run_has_it(run):
    data = results()
    data['settings']['pages'].append('mix')
    data['capacity'] += [capacity('b-postgres-pool', 'mix', n, 1000.0) for n in (1, 2, 3)]
    out = run(['RESULTS', '--rate', '2500'], data)[1]
    assert out.startswith('2,500 requests/s of mix within p99 ≤ 10 ms')
    assert 'counts every request of a visit' in out
    # 2,500 / (1,000 x 0.8) = 3.1
    assert list(rows(out)) == ['b-postgres-pool'] and rows(out)['b-postgres-pool'][2] == '4'
    # two pages and no mix: which one is asked
    data['capacity'] = [c for c in data['capacity'] if c['page'] != 'mix']
    data['capacity'] += [capacity('a-tarantool-one', 'index', 1, 10.0)]
    status, _, err = run(['RESULTS', '--rate', '2500'], data)
    assert status == 2 and err.endswith('choose a workload with --workload: good, index\n')


def floor_of(when, *p99s):
    return {'when': when, 'rate': 500, 'duration': 3,
            'runs': [{'p50': 0.2, 'p99': v, 'max': v * 2,
                      'miss': None if v <= 10 else 'p99 %s ms' % v} for v in p99s]}


def test_a_machine_floor_past_the_budget_is_said(run):
    from bench.latency import floor
    quiet = results()
    quiet['floor'] = [floor_of('before', 1.0, 2.0, 3.0), floor_of('after', 1.5, 1.5, 9.0)]
    said = floor.lines(quiet['floor'], SLO)
    assert said == ["Machine floor (what the host alone adds): nginx's `/ugly` at "
                    '500 requests/s, 3 s runs, p99 before 1.0, 2.0, 3.0 ms; after '
                    '1.5, 1.5, 9.0 ms (median 1.8 ms).']
    status, out, _ = run(['RESULTS', '--rate', '1000', '--workload', 'good'], quiet)
    assert status == 0 and 'Machine:' not in out
    noisy = results()
    noisy['floor'] = [floor_of('before', 1.0, 22.5, 3.0), floor_of('after', 12.0, 1.0, 1.0)]
    said = floor.lines(noisy['floor'], SLO)
    assert said[1].startswith('⚠ 2 of 6 floor runs missed p99 ≤ 10 ms')
    status, out, _ = run(['RESULTS', '--rate', '1000', '--workload', 'good'], noisy)
    assert status == 0 and 'Machine: ⚠ 2 of 6 floor runs missed p99 ≤ 10 ms' in out
    # judged against the budget asked: both runs keep p99 within 25 ms
    status, out, _ = run(['RESULTS', '--rate', '1000', '--workload', 'good',
                          '--slo', 'p99=25ms'], noisy)
    assert 'Machine:' not in out
    # the server's core: steady says how; slowed in bursts warns, unless
    # its bursts are short against the budget; a failed probe says why
    core = {'windows': 299, 'median_us': 40.0, 'slow_pct': 0.3,
            'longest_ms': 10, 'p1': 0.6, 'min': 0.4}
    quiet['floor'][0]['core'] = core
    quiet['floor'][1]['core'] = dict(core, slow_pct=0.0, min=0.7)
    said = floor.lines(quiet['floor'], SLO)
    assert len(said) == 1 and said[0].endswith(
        'The server\'s core ran at under half speed in 0.3, 0.0 % of its '
        '10 ms windows (at worst 0.4 of its usual pace, for up to 10 ms in a '
        'row).'), said
    quiet['floor'][1]['core'] = dict(core, slow_pct=7.7, longest_ms=40, min=0.07)
    said = floor.lines(quiet['floor'], SLO)
    assert len(said) == 2 and said[1].startswith(
        '⚠ the server\'s core ran at under half speed in more than 1 % of '
        'its 10 ms windows'), said
    status, out, _ = run(['RESULTS', '--rate', '1000', '--workload', 'good'], quiet)
    assert status == 0 and "Machine: ⚠ the server's core ran at under half" in out
    status, out, _ = run(['RESULTS', '--rate', '1000', '--workload', 'good',
                          '--slo', 'p99=100ms'], quiet)
    assert status == 0 and 'Machine:' not in out
    quiet['floor'][1]['core'] = {'error': 'the core probe failed: timed out'}
    assert floor.lines(quiet['floor'], SLO)[1:] == ['the core probe failed: timed out']
    # a floor that could not be taken says why; none says nothing
    assert floor.lines([{'when': 'before', 'error': 'nginx did not start'}], SLO) == [
        'Machine floor: not taken (nginx did not start).']
    assert floor.lines(None, SLO) == []


def with_demand(data, target, rates, demand, server_s, database_s,
                replicas=None):
    """Fixed-rate points of target at rates (the last one missed), each
    with its demand per tier and its CPU over 3 s (the core's busy share:
    (server_s + database_s) / 3)."""
    for run in (1, 2, 3):
        for rate in rates:
            p = point(target, 'good', run, rate, 30.0 if rate == rates[-1] else 5.0)
            p['cpu_s'] = {'server': server_s, 'database': database_s}
            p['demand'] = dict(demand, replicas_us=replicas, written_bytes=300.0)
            data['latency'].append(p)
    return data


def sizing_results():
    """a (Tarantool): 150 µs server, 50 µs on its transaction thread, 20 µs
    on its other threads, its core 80 % busy at 4,000/s; b (PostgreSQL):
    200 µs server, 300 µs in its processes, 75 % busy at 2,500/s; a run of
    a with 2 read replicas: 20 µs left on the primary's thread, 60 µs on
    the replicas."""
    data = results()
    data['latency'] = []
    with_demand(data, 'a-tarantool-one', [1000.0, 2000.0, 4000.0, 4500.0],
                {'server_us': 150.0, 'serial_us': 50.0, 'spread_us': 20.0},
                1.6, 0.8)
    with_demand(data, 'b-postgres-pool', [1000.0, 2500.0, 2800.0],
                {'server_us': 200.0, 'serial_us': 0.0, 'spread_us': 300.0},
                1.5, 0.75)
    a, b = data['targets'][0], data['targets'][1]
    a['memory'] = {'server_peak_kib': 60 * 1024, 'database_peak_kib': 300 * 1024,
                   'server_peak_pss_kib': 30 * 1024,
                   'database_peak_pss_kib': 200 * 1024}
    b['memory'] = {'server_peak_kib': 50 * 1024, 'database_peak_kib': 400 * 1024}
    return data


def test_a_site_is_sized_per_tier_from_the_demand(run):
    out = run(['RESULTS', '--rate', '10000', '--workload', 'good'],
              sizing_results())[1]
    a = columns(out)['a-tarantool-one']
    # each core at t = 0.8 x u = 0.64; the tiers summed, co-located as in the
    # run: 10,000 x (150 + 50 + 20) µs = 2.2 cores of work / 0.64 = 3.4: 4
    # cores; the transaction thread 0.5 of a core, within 0.64
    assert [a['cores'], a['basis'], a['database']] == ['4', 'modelled', '1 primary']
    # first limit: the transaction thread at 0.64 / 50 µs
    assert a['first limit'] == 'transaction thread at 12,800/s'
    assert a['monthly $'] == '%.2f' % (4 * 730 * 0.04)
    # PSS: 4 server processes of 30 MiB and the database's 200 MiB
    assert a['memory'] == '320 MiB'
    assert ('modelled: 4 cores, each at 64 % busy (80 % of the 80 % its core '
            'was at 4,000/s, keeping the budget)') in a['notes']
    assert '300 bytes written' in a['notes']
    assert 'read replicas not measured in this run' in a['notes']
    b = columns(out)['b-postgres-pool']
    # t = 0.8 x 0.75 = 0.6; 10,000 x 500 µs = 5 cores of work / 0.6 = 8.3: 9
    assert [b['cores'], b['database'], b['first limit']] == [
        '9', '1 primary', '64 cores at 76,800/s']
    assert b['memory'] == '850 MiB'        # RSS: 9 x 50 + 400
    assert b['notes'].startswith('PostgreSQL over 9 cores, measured on one: its '
                                 'WAL writer and the row locks of votes')
    # c and d (no demand: cores from capacity alone, at 80 % of it)
    assert list(columns(out)) == ['c-tarantool-one', 'd-tarantool-one',
                                  'a-tarantool-one', 'b-postgres-pool']
    assert columns(out)['c-tarantool-one']['database'] == '–'
    assert 'Sizing: the tiers\' CPU per request, summed' in out


def test_the_site_is_rounded_not_each_tier(run):
    """A little database demand does not take a core of its own: a site
    whose tiers sum to under a core is one core, where rounding each tier
    (the server, the transaction thread, the other threads) made three."""
    out = run(['RESULTS', '--rate', '4200', '--workload', 'good',
               '--headroom', '1'], sizing_results())[1]
    # each core at u = 0.8: 4,200 x 220 µs = 0.92 of a core of work: 2 cores
    # (each tier rounded: 1 app core, 1 for the transaction thread, 1 for
    # the other threads: 3)
    a = columns(out)['a-tarantool-one']
    assert [a['cores'], a['basis']] == ['2', 'modelled']
    data = sizing_results()
    for p in data['latency']:
        if p['target'] == 'a-tarantool-one':
            p['demand'].update(serial_us=5.0, spread_us=3.0)
    out = run(['RESULTS', '--rate', '4200', '--workload', 'good',
               '--headroom', '1'], data)[1]
    # 4,200 x 158 µs = 0.66 of a core, within 0.8: one core
    assert columns(out)['a-tarantool-one']['cores'] == '1'


def test_a_rate_the_run_served_is_its_one_core_measured(run):
    """Where the capacity found is at least the rate, the run served it on
    its one core, server and database together: 1 core, measured, ranked
    before any modelled site."""
    out = run(['RESULTS', '--rate', '3000', '--workload', 'good', '--max-cores',
               '1'], sizing_results())[1]
    table = columns(out)
    assert [(n, c['cores'], c['basis']) for n, c in table.items()] == [
        ('c-tarantool-one', '1', 'measured'), ('d-tarantool-one', '1', 'measured'),
        ('a-tarantool-one', '1', 'measured'), ('b-postgres-pool', '–', 'modelled')]
    assert table['a-tarantool-one']['first limit'] == 'measured to 4,000/s'
    assert table['a-tarantool-one']['memory'] == '230 MiB'     # PSS: 30 + 200
    assert 'Measured: a stack whose capacity is at least the rate' in out


def test_headroom_sets_each_modelled_core_s_busy_share(run):
    data = sizing_results()
    cores = {h: columns(run(['RESULTS', '--rate', '10000', '--workload', 'good',
                             '--headroom', h], data)[1])['a-tarantool-one']['cores']
             for h in ('0.5', '0.65', '0.8', '1')}
    # 2.2 cores of work at 0.52, 0.64 and 0.8 of a core; at 0.4 the
    # transaction thread (0.5 of a core) no longer fits its share
    assert cores == {'0.5': '–', '0.65': '5', '0.8': '4', '1': '3'}
    status, out, err = run(['RESULTS', '--rate', '10000', '--headroom', '1.5'], data)
    assert status == 2 and '--headroom must be at most 1 (got 1.5)' in err


def test_the_committed_run_serves_500_per_s_on_one_core(run):
    """The stacks whose mix capacity (the median of their searches) is
    500/s or more served it on one shared core: at 500/s on at most 1 core,
    those, measured; no other stack is said to be measured there."""
    data = results_file.load(os.path.join(ROOT, 'docs', 'results'))
    held = {n for (n, p), c in capacities(data).items()
            if p == 'mix' and (c['rate']['median'] or 0) >= 500}
    status, out, err = run(['RESULTS', '--rate', '500', '--max-cores', '1'], data)
    assert status == 0, err
    table = columns(out)
    fits = {n for n, c in table.items() if c['cores'] == '1'}
    assert held and held <= fits
    assert {n for n in table if table[n]['basis'] == 'measured'} == held


def test_one_primary_that_cannot_take_the_rate_is_said(run):
    data = sizing_results()
    out = run(['RESULTS', '--rate', '20000', '--workload', 'good'], data)[1]
    a = columns(out)['a-tarantool-one']
    assert a['cores'] == '–' and a['monthly $'] == '–'
    assert a['first limit'] == 'transaction thread 100 %'
    assert a['notes'].startswith(
        'one Tarantool primary: its transaction thread would be 100 % busy (the '
        'site keeps each core within 64 %): shard the writes; read replicas not '
        'measured in this run')
    assert list(columns(out))[-1] == 'a-tarantool-one'     # after those that fit
    # no engine fits: the refusal says why the nearest cannot
    status, out, err = run(['RESULTS', '--rate', '20000', '--workload', 'good',
                            '--max-cores', '3'], data)
    assert status == 1 and out == ''
    # 20,000 x 220 µs / 0.64 = 6.9: 7 cores
    assert err == ('bench.py advise: error: no engine serves 20,000 requests/s of '
                   'good within p99 ≤ 10 ms on at most 3 cores (a-tarantool-one: '
                   '7 cores; one Tarantool primary: its transaction thread would '
                   'be 100 % busy (the site keeps each core within 64 %): shard '
                   'the writes; read replicas not measured in this run)\n')


def test_read_replicas_take_the_reads_where_a_replicas_run_measured_them(run):
    data = sizing_results()
    data['targets'].append({'name': 'a-tarantool-one (2 replicas)',
                            'kind': 'engine', 'status': 'ok'})
    with_demand(data, 'a-tarantool-one (2 replicas)', [1000.0, 4000.0, 4500.0],
                {'server_us': 150.0, 'serial_us': 20.0, 'spread_us': 10.0},
                1.6, 0.8, replicas=60.0)
    out = run(['RESULTS', '--rate', '20000', '--workload', 'good'], data)[1]
    a = columns(out)['a-tarantool-one']
    # the primary's thread 0.4 (within 0.64); 20,000 x (150 + 20 + 10 + 60)
    # µs = 4.8 cores of work / 0.64 = 7.5: 8 cores; replicas
    # ceil(20,000 x 60 µs / 0.64) = 2
    assert [a['cores'], a['database'], a['first limit']] == [
        '8', 'primary + 2 replicas', 'transaction thread at 32,000/s']
    assert a['memory'] == '840 MiB'        # 8 x 30 + 3 x 200


def cluster_results():
    """sizing_results with e (a Redis Cluster of 3 primaries: 300 µs
    server; the primaries' main threads 100, 40 and 40 µs, so 60 µs the
    rankings' shard's own and 120 µs the buckets'; the rankings' replica
    100 µs, a bucket shard's 10, so 90 µs of reads; its core 60 % busy at
    4,000/s) and f (one Redis: 150 µs on its main thread)."""
    data = sizing_results()
    for name in ('e-rediscluster-pool', 'f-redis-one'):
        data['targets'].append({'name': name, 'kind': 'engine', 'status': 'ok'})
        for run in (1, 2, 3):
            data['capacity'].append(capacity(name, 'good', run, 4000.0))
    with_demand(data, 'e-rediscluster-pool', [1000.0, 4000.0, 4500.0],
                {'server_us': 300.0, 'serial_us': 40.0, 'spread_us': 5.0,
                 'nodes_us': {'shard 7002': 40.0, 'rankings 7001': 100.0,
                              'shard 7003': 40.0, 'rankings-replica 7004': 100.0,
                              'shard-replica 7005': 10.0,
                              'shard-replica 7006': 10.0}},
                1.2, 0.6, replicas=500.0)
    with_demand(data, 'f-redis-one', [1000.0, 4000.0, 4500.0],
                {'server_us': 300.0, 'serial_us': 150.0, 'spread_us': 5.0},
                1.2, 0.6)
    data['targets'][-2]['memory'] = {
        'server_peak_kib': 40 * 1024, 'database_peak_kib': 600 * 1024}
    return data


def test_a_cluster_is_sized_by_its_rankings_shard_and_bucket_shards(run):
    """Past one Redis primary's main thread, the cluster is sized from
    its primaries' demand; past its rankings' shard, it is refused too."""
    out = run(['RESULTS', '--rate', '6000', '--workload', 'good'],
              cluster_results())[1]
    e, f = columns(out)['e-rediscluster-pool'], columns(out)['f-redis-one']
    # t = 0.8 x 0.6 = 0.48; 6,000 x (300 + 60 + 90 + 120) µs = 3.42 cores of
    # work / 0.48 = 7.1: 8 cores; the rankings' shard 0.36 of a core; its
    # replicas ceil(6,000 x 90 µs / 0.48) = 2, bucket shards
    # ceil(6,000 x 120 µs / 0.48) = 2
    assert [e['cores'], e['database'], e['first limit']] == [
        '8', 'rankings + 2 replicas, 2 bucket shards + a replica each',
        "rankings' shard at 8,000/s"]
    assert ("60 on the rankings' shard + 90 on its replicas + 120 over 3 "
            "bucket shards") in e['notes']
    # 8 x 40 MiB, and the 6 nodes' 600 MiB for 7 nodes (of 6 measured)
    assert e['memory'] == '1,020 MiB'
    # one Redis: 6,000 x 150 µs = 0.9 of a core on its main thread
    assert f['cores'] == '–' and f['notes'].startswith(
        'one Redis primary: its main thread would be 90 % busy')
    out = run(['RESULTS', '--rate', '20000', '--workload', 'good'],
              cluster_results())[1]
    e = columns(out)['e-rediscluster-pool']
    assert e['cores'] == '–' and e['notes'].startswith(
        "the rankings' shard: its main thread would be 120 % busy (the site "
        "keeps each core within 48 %): a cluster spreads the visitors' data "
        "and the reads, not the votes' applies")


def test_demand_without_the_split_is_an_estimate(run):
    """A run from before the split (us_per_request only): the whole of
    Tarantool's CPU counted on its transaction thread, said as such."""
    data = sizing_results()
    for p in data['latency']:
        del p['demand']
        p['us_per_request'] = {'server': 150.0, 'database': 70.0}
    out = run(['RESULTS', '--rate', '20000', '--workload', 'good'], data)[1]
    a = columns(out)['a-tarantool-one']
    assert a['first limit'] == 'transaction thread 140 %'
    assert 'would be up to 140 % busy' in a['notes']
    assert 'split estimated' in a['notes']
    b = columns(out)['b-postgres-pool']     # PostgreSQL: no serial thread
    # 20,000 x (150 + 70) µs / 0.6 = 7.3
    assert [b['database'], b['cores']] == ['1 primary', '8']
    assert 'split estimated' not in b['notes']


@pytest.mark.parametrize('share, server_us', [(1e-320, 150.0), ('x', 150.0),
                                              (0.8, 'many'), (0.8, -5.0)])
def test_odd_demand_figures_are_refused_or_sized_never_a_crash(run, share, server_us):
    data = sizing_results()
    for p in data['latency']:
        p['cpu_s'] = {'server': share, 'database': 0.0}
        p['demand']['server_us'] = server_us
    status, out, err = run(['RESULTS', '--rate', '10000', '--workload', 'good'], data)
    assert status in (0, 1, 2) and 'Traceback' not in err
    assert (status == 0) == bool(out) and (status == 0) != bool(err)


def test_a_cluster_s_nodes_are_split_by_role():
    """The rankings' primary less a bucket shard's (the mean of the other
    primaries), the buckets' over the primaries, the rankings' replicas'
    reads less what a bucket shard's replica does (copying); a run that
    recorded the primaries only (a list) takes the busiest as the
    rankings'."""
    from bench.latency import demand
    assert demand.cluster({
        'rankings 7001': 100.0, 'shard 7002': 30.0, 'shard 7003': 50.0,
        'rankings-replica 7004': 70.0, 'shard-replica 7005': 5.0,
        'shard-replica 7006': 15.0}) == {
            'serial_us': 60.0, 'shards_us': 120.0, 'shards': 3,
            'replicas_us': 60.0}
    assert demand.cluster([40.0, 100.0, 40.0]) == {
        'serial_us': 60.0, 'shards_us': 120.0, 'shards': 3,
        'replicas_us': None}
    assert demand.cluster({'shard 7002': 30.0})['serial_us'] is None


def test_the_text_is_a_compact_table_then_numbered_notes(run):
    """Every line within 120 columns (the table: stack, cores, $/month,
    first limit, basis and its note's number), each row's other figures
    and notes under its number."""
    data = results_file.load(os.path.join(ROOT, 'docs', 'results'))
    for rate in ('500', '5000', '20000'):
        status, out, err = run(['RESULTS', '--rate', rate], data)
        assert status == 0, err
        assert max(len(line) for line in out.splitlines()) <= 120
        assert not re.search(r'\d\n\s+(%|MiB)', out)     # a number with its unit
        table = out.split('\n\nstack ', 1)[1].split('\n\n', 1)[0].splitlines()
        assert table[0].split() == ['cores', '$/month', 'first', 'limit', 'basis']
        assert [line.rsplit(' ', 1)[1] for line in table[1:]] == [
            '[%d]' % n for n in range(1, len(table))]
        assert len(columns(out)) == len({n for (n, p) in capacities(data)
                                         if p == 'mix'})


def test_database_and_framework_choose_the_engines(run):
    data = results_file.load(os.path.join(ROOT, 'docs', 'results'))
    out = run(['RESULTS', '--rate', '2000', '--database', 'postgres'], data)[1]
    on_postgres = {n for (n, p) in capacities(data) if p == 'mix' and any(
        '-%s-' % d in n for d in ('postgres', 'psycopg', 'sqlalchemy', 'django'))}
    assert on_postgres and set(columns(out)) == on_postgres
    out = run(['RESULTS', '--rate', '2000', '--framework', 'granian',
               '--database', 'tarantool'], data)[1]
    assert list(columns(out)) == ['granian-tarantool-one-uvloop']
    status, out, err = run(['RESULTS', '--rate', '2000', '--database', 'mongo'], data)
    assert status == 2 and err == (
        "bench.py advise: error: no engine on database 'mongo' in these results; "
        'present: postgres, redis, rediscluster, tarantool\n')


def test_a_price_per_core_month_is_the_core_hour_price_times_730(run):
    by_month = run(['RESULTS', '--rate', '10000', '--workload', 'good', '--price', '36.5'])
    by_hour = run(['RESULTS', '--rate', '10000', '--workload', 'good',
                   '--core-hour-price', '0.05'])
    assert by_month == by_hour and by_month[0] == 0
    assert '$36.50 a core-month' in flat(by_month[1])
    assert rows(by_month[1])['a-tarantool-one'][3] == '%.2f' % (4 * 36.5)
    status, out, err = run(['RESULTS', '--rate', '100', '--price', 'inf'])
    assert status == 2 and err == ('bench.py advise: error: --price must be a finite '
                                   'number (got inf)\n')
