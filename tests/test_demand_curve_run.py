"""A real latency run of one engine (aiohttp on Tarantool, three rates of
2 s and the search's probes): each tier's CPU per request at each rate is
recorded as the curve, and advise reads the server's where an app core
runs, the database's at the site's rate."""
import json
import math
import re
import subprocess
import sys

import pytest

from conftest import ROOT, TEST_PACKS, free_port, tarantool_address
from plugins.tools import need_oha
from bench import advise, sizing
from bench.latency import demand

RATES = (150, 500, 3000)   # the first two served on a loaded machine too


@pytest.mark.timeout(600)
def test_a_run_records_the_curve_and_advise_reads_it(tarantool, tmp_path):
    need_oha()
    a = tarantool_address(tarantool)
    out = tmp_path / 'run'
    argv = [sys.executable, 'bench.py', '--latency', '--engines',
            'aiohttp-tarantool-one', '--pages', 'good', '--duration', '1',
            '--warmup', '1', '--runs', '1', '--point-duration', '2',
            '--rates', ','.join(map(str, RATES)), '--slo', 'p99=50ms',
            '--tarantool', '%s:%d' % (a.host, a.port), '--packs', str(TEST_PACKS),
            '--port', str(free_port()), '--out', str(out)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=500)
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((out / 'results.json').read_text())
    assert results['machine']['disk']['bytes_per_s'] > 0
    [entry] = results['demand']
    curve = entry['curve']
    rates = [c['rate'] for c in curve]
    served = [r for r in RATES if float(r) in rates]
    assert len(served) >= 2 and len(rates) >= 3, curve
    for c in curve:
        assert c['server_us'] > 0 and c['serial_us'] is not None, c
    # the server's CPU per request falls as the rate rises (fewer wake-ups)
    assert curve[-1]['server_us'] < curve[0]['server_us'], curve
    slo = results['settings']['latency']['slo']
    at = demand.at_capacity(results, 'aiohttp-tarantool-one', 'good', slo)
    capacity = at['rate']
    # a site past one core's capacity; on a loaded machine the transaction
    # thread may not keep 4 times it within its share (advise refuses it,
    # rightly: shard the writes), so the highest of these it sizes
    refused = []
    for times in (4, 3, 2, 1.5):
        rate = round(times * capacity)
        try:
            _, rows = advise.advise(results, rate, max_cores=1000)
            break
        except advise.Refused as e:
            refused.append(str(e))
    else:
        pytest.fail('; '.join(refused))
    [row] = rows
    notes = '; '.join(row['notes'])
    # the server read at an app core's own rate, the database at the site's
    t = sizing.HEADROOM * at['share']
    app = min(sizing.own_rate(curve, 'server_us', t)[0], rate)
    server = sizing.at(curve, app, 'server_us')[0]
    serial = sizing.at(curve, rate, 'serial_us')[0]
    # (advise on the co-located point would say "at that one point")
    found = re.search(r'server (\d+) at ([\d,]+)/s .*?, database (\d+) on its '
                      r'transaction thread \+ \d+ at ([\d,]+)/s', notes)
    assert found, notes
    assert found.groups() == ('%.0f' % server, '{:,.0f}'.format(app),
                              '%.0f' % serial, '{:,}'.format(rate))
    spread = sizing.at(curve, rate, 'spread_us')[0]
    cores = math.ceil(rate * (server + serial + spread) / 1e6 / t - 1e-9)
    assert row['total'] == max(1, cores)
    done = subprocess.run([sys.executable, 'bench.py', 'advise', str(out), '--rate',
                           str(rate), '--max-cores', '1000'], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "on the run's curve" in ' '.join(done.stdout.split())
