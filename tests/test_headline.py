"""The mix by database (bench/headline.py): each framework's capacity on
each database the run has, in results.md and for the README."""
import os

from bench import headline, report, results_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def found(target, rates, missed=None, page='mix'):
    return [{'target': target, 'page': page, 'rate': r, 'open': False,
             'saturation': 1000.0, 'slo': {'percentile': 'p99', 'ms': 10.0},
             'missed_at': missed} for r in rates]


def run(capacity):
    return {'settings': {'latency': {'slo': {'percentile': 'p99',
                                             'ms': 10.0}}},
            'capacity': capacity}


def test_a_column_per_database_a_row_per_framework_best_first():
    results = run(found('aiohttp-tarantool-one-uvloop', [3000, 3100, 2900])
                  + found('aiohttp-redis-one-uvloop', [1800, 1800, 1800])
                  + found('sanic-tarantool-one-uvloop', [3500, 1500, 3400])
                  + found('sanic-postgres-pool-uvloop', [0, 0, 0], 201.4)
                  + found('sanic-redis-one-uvloop', [900] * 3, page='good'))
    drivers, rows = headline.grid(results)
    assert [d for d, _ in drivers] == ['tarantool', 'postgres', 'redis']
    assert rows == [
        ('sanic', {'tarantool': '3,400 (1,500–3,500) ⚠',
                   'postgres': '< 201', 'redis': '–'}),
        ('aiohttp', {'tarantool': '3,000 (2,900–3,100)', 'postgres': '–',
                     'redis': '1,800'})]
    lines = headline.table(results)
    assert lines[0].startswith('| framework | Tarantool, p99 ≤ 10 ms | '
                               'PostgreSQL (asyncpg), p99 ≤ 10 ms |')
    assert lines[2] == '| sanic | 3,400 (1,500–3,500) ⚠ | < 201 | – |'


def test_a_search_that_kept_nothing_beside_others_shows_their_range():
    results = run(found('fastapi-postgres-pool-uvloop', [394.6, 0, 0], 507))
    assert headline.grid(results)[1] == [
        ('fastapi', {'postgres': '0 (0–395) ⚠'})]


def test_results_md_has_the_section_only_with_two_databases():
    one = run(found('aiohttp-tarantool-one-uvloop', [3000] * 3))
    two = run(one['capacity'] + found('aiohttp-redis-one-uvloop', [1800]))
    assert headline.section(one) == []
    assert headline.section(two)[0] == '## The mix by database'


def test_the_committed_run_renders_it_in_results_md():
    results = results_file.load(os.path.join(ROOT, 'docs', 'results'))
    text = report.render(results)
    drivers, rows = headline.grid(results)
    assert '## The mix by database' in text
    for line in headline.table(results):
        assert line in text
    assert len(rows) == len({n.split('-')[0] for n, p in
                             headline.capacities(results) if p == 'mix'})
