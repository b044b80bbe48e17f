"""The demand curve: each tier's CPU per request at each rate a run served,
read where the site runs the tier (an app core at its own rate, the
database at the site's), interpolated in log rate, never extrapolated."""
import math
import re

import pytest

from bench import disk, sizing
from bench.latency import demand
from test_advise import columns, flat, run, sizing_results, with_demand  # noqa: F401

CURVE = [{'rate': 1000.0, 'server_us': 300.0}, {'rate': 4000.0, 'server_us': 100.0}]


def test_a_figure_between_two_rates_is_interpolated_in_log_rate():
    # 2,000/s is half way from 1,000 to 4,000 in log rate
    us, how = sizing.at(CURVE, 2000.0, 'server_us')
    assert how == 'measured' and us == pytest.approx(200.0)
    assert sizing.at(CURVE, 1000.0, 'server_us') == (300.0, 'measured')
    assert sizing.at(CURVE, 4000.0, 'server_us') == (100.0, 'measured')


def test_past_either_end_the_end_s_figure_is_held_and_said():
    assert sizing.at(CURVE, 9000.0, 'server_us') == (100.0, 'beyond')
    assert sizing.at(CURVE, 500.0, 'server_us') == (300.0, 'below')
    assert sizing.at(CURVE, 2000.0, 'serial_us') == (None, None)


def test_a_core_s_own_rate_keeps_its_work_at_its_share():
    # 1,000 x 300 µs = 0.3 of a core, 4,000 x 100 µs = 0.4: 0.35 between
    rate, how = sizing.own_rate(CURVE, 'server_us', 0.35)
    assert how == 'measured' and 1000 < rate < 4000
    assert rate * sizing.at(CURVE, rate, 'server_us')[0] == pytest.approx(350000)
    # past 4,000/s at 100 µs held; under 1,000/s at 300 µs
    assert sizing.own_rate(CURVE, 'server_us', 0.8) == (pytest.approx(8000), 'beyond')
    assert sizing.own_rate(CURVE, 'server_us', 0.15) == (pytest.approx(500), 'below')


def test_the_server_is_read_at_its_core_s_rate_the_database_at_the_site_s():
    curve = [dict(c, serial_us=c['server_us'] / 2) for c in CURVE]
    d = sizing.figures({'curve': curve, 'server_us': 1.0, 'serial_us': 1.0}, 2000.0, 0.35)
    app = d['read_at'][0][2]
    assert 1000 < app < 2000 and d['server_us'] == pytest.approx(350000 / app)
    assert d['serial_us'] == pytest.approx(100.0)
    assert [(f, how) for f, _, _, how in d['read_at']] == [
        ('server_us', 'measured'), ('serial_us', 'measured')]
    # a site slower than one app core: its server at the site's rate
    d = sizing.figures({'curve': curve, 'server_us': 1.0}, 1500.0, 0.8)
    assert d['read_at'][0][2] == 1500.0
    # one rate: the point as it is
    d = sizing.figures({'curve': curve[:1], 'server_us': 7.0}, 1500.0, 0.8)
    assert d['server_us'] == 7.0 and d['read_at'] is None


def falling():
    """sizing_results with a-tarantool-one's demand falling as the rate
    rises (server, transaction thread, other threads, µs per request)."""
    data = sizing_results()
    data['latency'] = [p for p in data['latency'] if p['target'] != 'a-tarantool-one']
    for rate, (server, serial, spread) in (
            (1000.0, (300.0, 100.0, 20.0)), (2000.0, (200.0, 70.0, 20.0)),
            (4000.0, (150.0, 50.0, 20.0)), (4500.0, (120.0, 40.0, 20.0))):
        with_demand(data, 'a-tarantool-one', [rate, 9e9] if rate < 4500 else [rate],
                    {'server_us': server, 'serial_us': serial, 'spread_us': spread},
                    1.6, 0.8)
    data['latency'] = [p for p in data['latency'] if p['offered'] < 9e9]
    for p in data['latency']:
        if p['target'] == 'a-tarantool-one' and p['offered'] == 4500.0:
            p['oha']['latency_ms']['p99'] = 30.0
    return data


def test_the_run_records_the_curve_per_engine_and_page():
    found = {e['target']: e for e in demand.summary(falling())}
    curve = found['a-tarantool-one']['curve']
    assert [(c['rate'], c['server_us'], c['serial_us'], c['points']) for c in curve] == [
        (1000.0, 300.0, 100.0, 3), (2000.0, 200.0, 70.0, 3), (4000.0, 150.0, 50.0, 3),
        (4500.0, 120.0, 40.0, 3)]
    # a point that fell short of its rate is not on the curve
    data = falling()
    for p in data['latency']:
        if p['offered'] == 4500.0:
            p['oha']['achieved'] = 3000.0
    assert [c['rate'] for c in demand.curve(data, 'a-tarantool-one', 'good')] == [
        1000.0, 2000.0, 4000.0]


def test_advise_sizes_from_the_curve_not_the_co_located_point(run):  # noqa: F811
    out = run(['RESULTS', '--rate', '10000', '--workload', 'good'], falling())[1]
    a = columns(out)['a-tarantool-one']
    # t = 0.8 x 0.8 = 0.64. An app core alone: 4,500 x 120 µs = 0.54 < 0.64,
    # so past the curve, at 120 µs held: 5,333/s. The database at 10,000/s:
    # 40 + 20 µs held. 10,000 x 180 µs / 0.64 = 2.8: 3 cores (at the
    # co-located point, 150 + 50 + 20 µs: 4 cores)
    assert a['cores'] == '3'
    assert a['first limit'] == 'transaction thread at 16,000/s'
    assert ("curve (1,000–4,500/s): server 120 at 5,333/s (an app core's rate: "
            "its own capacity, at most the site's), database 40 on its "
            "transaction thread + 20 at 10,000/s (the site's rate); past 4,500/s, "
            "the highest rate measured, each held at its figure there: "
            "modelled") in a['notes']
    # 5,000/s: the database's figures between two rates measured
    out = run(['RESULTS', '--rate', '4300', '--workload', 'good'], falling())[1]
    us = 50 + (40 - 50) * math.log(4300 / 4000) / math.log(4500 / 4000)
    assert 'transaction thread + 20 at 4,300/s' in columns(out)['a-tarantool-one']['notes']
    # the first limit: where the thread reaches t on the curve, whatever the rate asked
    assert columns(out)['a-tarantool-one']['first limit'] == 'transaction thread at 16,000/s'
    assert 'database %.0f on its' % us in columns(out)['a-tarantool-one']['notes']


def test_a_run_of_one_rate_falls_back_to_its_point_and_says_so(run):  # noqa: F811
    data = falling()
    data['latency'] = [p for p in data['latency'] if p['target'] != 'a-tarantool-one'
                       or p['offered'] >= 4000.0]
    for p in data['latency']:
        if p['target'] == 'a-tarantool-one' and p['offered'] == 4500.0:
            p['oha']['achieved'] = 3000.0
    a = columns(run(['RESULTS', '--rate', '10000', '--workload', 'good'], data)[1])[
        'a-tarantool-one']
    assert a['cores'] == '4'
    assert ('CPU µs per request at that one point (the run holds no curve of two '
            'rates or more): server 150, database 50 on its transaction thread + 20'
            ) in a['notes']


# bench.py cluster-batches' figures as --into writes them
BATCHES = {'sizes': {'1': [[345.0, 200.0], 5.3], '10': [[90.0, 45.0], 6.7],
                     '100': [[55.0, 30.0], 19.5], '1000': [[45.5, 17.0], 140.0]},
           'paced': {'100': [1.0, [520.0, 300.0]], '500': [83.0, [164.0, 80.0]]},
           'per_vote_mix_requests': 2 / 0.7, 'measured': '2026-12-04T01:00:00+0000'}


def test_the_rankings_shard_is_sized_from_cluster_batches(run):  # noqa: F811
    from test_advise import cluster_results
    data = cluster_results()
    for r in data['latency'] + data['capacity']:    # the mix: votes
        r['page'] = 'mix' if r['page'] == 'good' else r['page']
    out = run(['RESULTS', '--rate', '6000', '--workload', 'mix'], data)[1]
    assert ("Redis Cluster ceiling, e-rediscluster-pool: 8,000 mix requests/s, its "
            "rankings' shard's main thread at 48 % (from the run's own points: the "
            "run carries no bench.py cluster-batches figures; past 4,500/s held: "
            "modelled)") in flat(out)
    assert "the run carries no bench.py cluster-batches figures (its votes'" in \
        columns(out)['e-rediscluster-pool']['notes']
    # votes cast at 2,000/s too (5,714 mix/s), in batches of 500
    data['cluster_batches'] = dict(BATCHES, paced=dict(BATCHES['paced'],
                                                       **{'2000': [500.0, [60.0, 25.0]]}))
    out = run(['RESULTS', '--rate', '6000', '--workload', 'mix'], data)[1]
    # Each server forms its own batches, at its own rate: an app core at
    # t = 0.48 of 300 µs is 1,600 mix/s, between 500 votes/s (1,429 mix/s,
    # batches of 83) and 2,000 (5,714 mix/s, batches of 500), not at the
    # site's 6,000/s. µs a vote at a batch: in log size between the sizes
    # measured; over 2/0.7 mix requests a vote.
    per = 0.7 / 2
    u83 = (90 + (55 - 90) * math.log10(8.3)) * per
    u500 = (55 + (45.5 - 55) * math.log10(5)) * per
    f = math.log(1600 / (500 / per)) / math.log(4)
    us, batch = u83 + (u500 - u83) * f, 83 + (500 - 83) * f
    top = '{:,}'.format(int(0.48e6 / us + 0.5))
    assert ("Redis Cluster ceiling, e-rediscluster-pool: %s mix requests/s, its "
            "rankings' shard's main thread at 48 %% (from bench.py cluster-batches "
            "(2026-12-04T01:00:00+0000): µs per vote at the batch one server's votes "
            "form at its 1,600 mix requests/s)" % top) in flat(out)
    e = columns(out)['e-rediscluster-pool']
    assert e['first limit'] == "rankings' shard at %s/s" % top
    assert ("the rankings' shard's %.0f µs per mix request at 1,600/s, one server's "
            "rate, from bench.py cluster-batches (each server's votes in batches of "
            "%.0f there)" % (us, batch)) in e['notes']
    # beside one Redis and Tarantool at 5,000, 20,000 and 100,000/s
    assert re.search(r'At 5,000/s: Redis Cluster \d+ cores \(e-rediscluster-pool, '
                     r'modelled\); one Redis none \(f-redis-one: main thread \d+ %\); '
                     r'Tarantool \d+ cores? \(', flat(out)), flat(out)
    assert 'At 100,000/s: Redis Cluster none (e-rediscluster-pool: ' in flat(out)
    # a page without votes: neither
    out = run(['RESULTS', '--rate', '6000', '--workload', 'good'], cluster_results())[1]
    assert 'cluster-batches' not in out and 'Redis Cluster ceiling' not in out


def test_a_site_writing_past_the_disk_s_rate_is_refused(run):  # noqa: F811
    data = sizing_results()     # 300 bytes written per request
    out = run(['RESULTS', '--rate', '10000', '--workload', 'good'], data)[1]
    assert ("300 bytes written to storage per request: 3.0 MB/s at this rate; the "
            "disk's write rate not measured in this run") in columns(out)['a-tarantool-one'][
                'notes']
    data['machine'] = {'disk': {'bytes_per_s': 10e6}}
    a = columns(run(['RESULTS', '--rate', '10000', '--workload', 'good'], data)[1])[
        'a-tarantool-one']
    assert a['cores'] == '4' and ("3.0 MB/s at this rate, 30 % of the disk's 10 MB/s"
                                  in a['notes'])
    # 3.0 MB/s past 80 % of 3.5 MB/s: refused, said first
    data['machine'] = {'disk': {'bytes_per_s': 3.5e6}}
    a = columns(run(['RESULTS', '--rate', '10000', '--workload', 'good'], data)[1])[
        'a-tarantool-one']
    assert [a['cores'], a['first limit']] == ['–', 'disk writes 86 %']
    assert a['notes'].startswith('storage: 300 bytes written to storage per request: '
                                 "3.0 MB/s at this rate, 86 % of the disk's 4 MB/s "
                                 '(more than 80 %): spread the writes over disks')


def test_the_disk_s_write_rate_is_measured_with_fsync(tmp_path):
    found = disk.write_rate(str(tmp_path), seconds=0.2)
    assert found['bytes_per_s'] > 0 and found['fsyncs_per_s'] > 0
    assert found['seconds'] >= 0.2 or found['bytes_per_s'] * found['seconds'] >= disk.MOST
    assert list(tmp_path.iterdir()) == []
    (tmp_path / 'file').write_text('')
    assert 'error' in disk.write_rate(str(tmp_path / 'file' / 'x'), seconds=0.1)


def test_results_md_shows_the_curve():
    data = falling()
    lines = demand.section(data, ['a-tarantool-one'])
    assert '| a-tarantool-one | good | 1,000: 300/100 · 2,000: 200/70 · 4,000: ' \
        '150/50 · 4,500: 120/40 |' in lines


def test_a_run_of_several_processes_reads_a_core_at_its_share_of_the_rate():
    """With --workers 2 each process ran at half a point's rate: a core of
    the site at 3,500/s is read at the run's 7,000/s."""
    d = sizing.figures({'curve': CURVE, 'server_us': 1.0, 'workers': 2}, 9000.0, 0.35)
    assert d['read_at'] == [('server_us', 100.0, pytest.approx(3500), 'beyond')]
    d = sizing.figures({'curve': CURVE, 'server_us': 1.0, 'workers': 2}, 1000.0, 0.35)
    # a core at 1,000/s: the run's 2,000/s, half way in log rate
    assert d['read_at'] == [('server_us', pytest.approx(200), 1000.0, 'measured')]
