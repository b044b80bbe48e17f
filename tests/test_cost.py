"""The cost per million requests of bench.py's results: its arithmetic on a
hand-made results.json, and its table in results.md and results.html."""
import pytest

from bench import cost, html

SLO = {'percentile': 'p99', 'ms': 10.0}


def wrk_run(target, page, rps, warmup=False):
    return {'target': target, 'page': page, 'mode': 'plain',
            'run': 0 if warmup else 1, 'warmup': warmup, 'exit_code': 0,
            'wrk': {'requests': int(rps * 2), 'seconds': 2.0,
                    'requests_per_sec': rps, 'non2xx': 0,
                    'latency_ms': {'p50': 1.0, 'p90': 2.0, 'p99': 3.0, 'max': 4.0},
                    'socket_errors': {'connect': 0, 'read': 0, 'write': 0,
                                      'timeout': 0}}}


def capacity(target, page, rate, open_=False):
    return {'target': target, 'page': page, 'run': 1, 'rate': rate,
            'open': open_, 'missed_at': None if open_ else rate * 1.1,
            'saturation': rate * 2, 'slo': SLO, 'pair': None}


def results(workers=1):
    """Two engines timed on good (closed loop) and on the mix (fixed rates),
    a hello reference and a failed engine, which have no cost."""
    return {
        'settings': {'pages': ['good', 'mix'], 'modes': ['plain'],
                     'workers': workers, 'latency': {'slo': SLO}},
        'pinning': {'server': 'taskset -c 1'},
        'targets': [{'name': 'a-tarantool-one', 'kind': 'engine', 'status': 'ok'},
                    {'name': 'b-postgres-pool', 'kind': 'engine', 'status': 'ok'},
                    {'name': 'c-tarantool-one', 'kind': 'engine', 'status': 'failed'},
                    {'name': 'hello-a', 'kind': 'hello', 'status': 'ok'}],
        'runs': [wrk_run('a-tarantool-one', 'good', 9999.0, warmup=True),
                 wrk_run('a-tarantool-one', 'good', 1800.0),
                 wrk_run('b-postgres-pool', 'good', 900.0),
                 wrk_run('hello-a', 'good', 5000.0)],
        'capacity': [capacity('a-tarantool-one', 'mix', 1000.0),
                     capacity('b-postgres-pool', 'mix', 500.0, open_=True),
                     capacity('hello-a', 'mix', 7000.0)],
    }


def by_cell(found):
    return {(r['target'], r['page']): r for r in found['rows']}


def test_cost_per_million_requests_on_one_core():
    # $0.036 a core-hour. 1,800/s: 6.48M requests an hour, $0.036 / 6.48 =
    # $0.005556 per million; 900/s: 3.24M, $0.011111; the mix at its
    # capacity, 1,000/s: 3.6M, $0.01; 500/s: 1.8M, $0.02.
    found = cost.records(results(), 0.036)
    assert found['core_hour_price'] == 0.036
    assert found['price_source'] == 'given'
    rows = by_cell(found)
    assert set(rows) == {('a-tarantool-one', 'good'), ('a-tarantool-one', 'mix'),
                         ('b-postgres-pool', 'good'), ('b-postgres-pool', 'mix')}
    assert rows['a-tarantool-one', 'good']['basis'] == 'saturation'
    assert rows['a-tarantool-one', 'good']['per_million'] == pytest.approx(0.005556, abs=1e-6)
    assert rows['b-postgres-pool', 'good']['per_million'] == pytest.approx(0.011111, abs=1e-6)
    assert rows['a-tarantool-one', 'mix']['basis'] == 'capacity'
    assert rows['a-tarantool-one', 'mix']['per_million'] == pytest.approx(0.01)
    assert rows['b-postgres-pool', 'mix']['per_million'] == pytest.approx(0.02)
    assert rows['b-postgres-pool', 'mix']['upper_bound']
    assert not rows['a-tarantool-one', 'mix']['upper_bound']


def test_cost_with_workers_counts_requests_per_core():
    # Two processes per engine on two cores: 1,800/s is 900/s a core.
    rows = by_cell(cost.records(results(workers=2), 0.036))
    assert rows['a-tarantool-one', 'good']['per_core'] == 900.0
    assert rows['a-tarantool-one', 'good']['per_million'] == pytest.approx(0.011111, abs=1e-6)


def test_default_price_is_advise_s():
    found = cost.records(results())
    assert found['core_hour_price'] == 0.04
    assert 'assumption' in found['price_source']
    # 1,000/s at $0.04: 0.04 / 3.6
    assert by_cell(found)['a-tarantool-one', 'mix']['per_million'] == pytest.approx(0.011111, abs=1e-6)


def test_a_fast_page_s_cost_keeps_its_precision():
    # 120,000/s at $0.04: 432M requests an hour, $0.04 / 432 = $0.000092593
    # per million; six decimals would make it 0.000093, 0.4 % off.
    data = results()
    data['runs'][1]['wrk']['requests_per_sec'] = 120000.0
    row = by_cell(cost.records(data))['a-tarantool-one', 'good']
    assert row['per_million'] == pytest.approx(0.04 / 432, rel=1e-4)


def test_no_capacity_has_no_cost():
    data = results()
    data['capacity'][0]['rate'] = 0.0
    row = by_cell(cost.records(data, 0.036))['a-tarantool-one', 'mix']
    assert row['per_million'] is None


def test_cost_table_in_results_md_and_html(tmp_path):
    data = results()
    data['cost'] = cost.records(data, 0.036)
    lines = cost.section(data)
    text = '\n'.join(lines)
    assert '## Cost per million requests' in text
    assert '$0.036 per core-hour' in text
    assert '| engine | good (at saturation) | mix (at capacity) |' in text
    assert '| a-tarantool-one | 0.0056 | 0.0100 |' in text
    assert '| b-postgres-pool | 0.0111 | ≤ 0.0200 |' in text
    assert 'hello-a' not in text and 'c-tarantool-one' not in text
    page = html.render('\n'.join(lines), str(tmp_path))
    assert '<th>mix (at capacity)</th>' in page
    assert '<td class="n">≤ 0.0200</td>' in page


def test_results_without_cost_have_no_cost_section():
    assert cost.section(results()) == []
