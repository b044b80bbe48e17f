"""bench.py --ceilings: what its checks hold a run to, and two quick real runs
against the test databases: one reports every call on both databases
(next to an engine, whose page table gets its share of the ceiling), one
whose calls return without calling fails."""
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT, TEST_PACKS, free_port, tarantool_address
from bench.ceilings import CALLS, SKIP_CALL, checks
from bench.ceilings.http_layer import http_server
from bench.ceilings.run import python
from plugins import tools

ENGINE = 'aiohttp-tarantool-one'


def record(call, done=100, **fields):
    r = {'database': 'tarantool', 'layer': 'asynctnt', 'call': call,
         'done': done, 'bad': 0, 'failed': 0, 'evidence': {},
         'before': [1, 10, 0, 0, 0, 0, 0], 'after': [1, 10, 0, 0, 0, 0, 0]}
    r.update(fields)
    return r


def test_a_call_is_held_to_what_the_database_shows():
    assert checks.failure(record('ranked')) is None
    assert 'no call' in checks.failure(record('ranked', done=0, bad=5))
    assert 'wrong results' in checks.failure(record('stats', bad=1))
    # The vote total and the views move by as much as the calls say.
    assert checks.failure(record('vote', after=[1, 10, 0, 0, 100, 0, 0])) \
        is None
    assert 'vote total moved by 99' in checks.failure(
        record('vote', after=[1, 10, 0, 0, 99, 0, 0]))
    assert checks.failure(record('vote', after=[1, 10, 0, 0, 90, 0, 0],
                                 slack=16)) is None
    assert 'winner' in checks.failure(record(
        'vote', after=[1, 10, 0, 0, 100, 0, 0],
        evidence={'winner_votes_moved': False}))
    assert 'views moved by 0' in checks.failure(record('visits'))
    # Ballots: the last pair counts, the session holds two per call, or
    # the scratch instance holds them all (up to its cap).
    assert 'do not count: unknown' in checks.failure(
        record('pair', evidence={'last_pair_vote': 'unknown'}))
    assert checks.failure(record('pair', evidence={'session_ballots': 200}))\
        is None
    assert checks.failure(record('pair', evidence={'max_ballots': 150},
                                 after=[1, 10, 0, 0, 0, 0, 150])) is None
    assert 'reads' in checks.failure(record('ranked', evidence={'reads': 3}))
    # Calls the database failed make the rate doubtful, not the work.
    assert checks.failure(record('ranked', failed=3)) is None
    assert 'failed' in checks.flag(record('ranked', failed=3))
    # HTTP: no more answers than calls that did their work.
    assert checks.failure(record('stats', answered=100)) is None
    assert '101 answers' in checks.failure(record('stats', answered=101))
    # Calls too slow to end within a short run: flagged, not failed; calls
    # answered without their work fail.
    slow = record('stats', done=0, answered=0)
    assert checks.failure(slow) is None
    assert 'no answer came back' in checks.flag(slow)
    assert 'no call' in checks.failure(record('stats', done=0, answered=50))


def test_the_http_server_is_the_fastest_hello_of_the_run():
    run = lambda name, rps, warmup=False: {  # noqa: E731
        'target': name, 'mode': 'plain', 'warmup': warmup,
        'wrk': {'requests_per_sec': rps}}
    results = {'runs': [run('hello-aiohttp', 9000), run('hello-sanic', 1),
                        run('hello-sanic', 99999, warmup=True),
                        run('hello-socketify-uvloop', 30000),
                        run(ENGINE, 99999)]}
    assert http_server(results)[:2] == ('socketify', 'uvloop')
    framework, loop, why = http_server({'runs': []})
    assert framework in ('japronto', 'socketify') and 'no hello' in why


def ceilings_bench(tarantool, postgres, out, *options, env=None,
                 flag='--ceilings'):
    """bench.py --ceilings (or its older name, --limits)."""
    a = tarantool_address(tarantool)
    # 16 connections: site_stats on PostgreSQL answers some 50 calls a
    # second here, so 100 waiting connections get no answer in a 1 s run.
    argv = [sys.executable, 'bench.py', flag, '--quick', '--warmup',
            '0', '--connections', '16',
            '--tarantool', '%s:%d' % (a.host, a.port), '--postgres',
            postgres.owner_dsn, '--packs', str(TEST_PACKS), '--port',
            str(free_port()), '--out', str(out)] + list(options)
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                          timeout=400, env=dict(os.environ, **(env or {})))


@pytest.fixture(scope='module')
def ceilings_run(tarantool, postgres_orm, tmp_path_factory):
    # The ORM's schema beside the site's, as in any run of the suite: its
    # tables of the same names must not be read for the site's.
    postgres = postgres_orm
    tools.need('wrk')
    out = tmp_path_factory.mktemp('ceilings') / 'out'
    done = ceilings_bench(tarantool, postgres, out, '--engines', ENGINE,
                        '--pages', 'good', '--plain')
    assert done.returncode == 0, done.stdout + done.stderr[-5000:]
    return done, out


def expected_layers(database):
    drivers = {'tarantool': ['asynctnt'] + (
        ['aiotarantool'] if python('aiotarantool') else []),
        'postgres': ['asyncpg']}[database]
    return ['database'] + drivers + ['http-async']


@pytest.mark.timeout(900)
def test_ceilings_report_every_call_on_both_databases(ceilings_run):
    done, out = ceilings_run
    assert '[bench]' in done.stderr and 'ceilings · postgres' in done.stderr
    results = json.loads((out / 'results.json').read_text())
    ceilings = results['ceilings']
    found = {(r['database'], r['layer'], r['call']): r
             for r in ceilings['runs']}
    for database in ('tarantool', 'postgres'):
        for layer in expected_layers(database):
            for call in CALLS:
                r = found[(database, layer, call)]
                assert r['failure'] is None, r
                if (database, call) == ('postgres', 'stats') and r['flag']:
                    # Counting every session: on a loaded test database
                    # no call may end within a 1 s run; said, not hidden.
                    assert 'no answer came back' in r['flag'] or \
                        'failed' in r['flag'], r
                    continue
                assert r['rate'] > 0 and r['done'] > 0, r
    if ceilings['http']['framework'] == 'japronto':
        assert all(found[('tarantool', 'http-sync', c)]['failure'] is None
                   for c in CALLS)
    # The vote moved the rating: the vote total, by one a call, and the
    # last winner's votes.
    vote = found[('tarantool', 'asynctnt', 'vote')]
    assert vote['after'][4] - vote['before'][4] == vote['done']
    assert vote['evidence'] == {'winner_votes_moved': True}
    assert set(ceilings['renders']) == {'good', 'bad', 'index', 'vote'}
    assert all(r['rate'] > 0 for r in ceilings['renders'].values())
    assert {t['name']: t['status'] for t in results['targets']} == {
        ENGINE: 'ok', 'ceilings': 'ok'}


@pytest.mark.timeout(900)
def test_ceilings_section_chart_and_share_of_the_ceiling(ceilings_run):
    _, out = ceilings_run
    md = (out / 'results.md').read_text()
    section = md.split('\n## Ceilings\n')[1]
    for database in ('tarantool', 'postgres'):
        for call in CALLS:
            assert re.search(r'^\| %s \| %s \| [^|]+ \| [\d,]+ \|'
                             % (database, call), section, re.M), (database,
                                                                 call)
    assert '### Pages rendered in-process, no I/O' in section
    table = md.split('### good · plain\n')[1].split('\n## ')[0]
    header = [c.strip() for c in table.strip().splitlines()[0].split('|')]
    row = re.search(r'^\| %s \|.*$' % ENGINE, table, re.M).group(0)
    share = float(row.split('|')[header.index('share of the ceiling')])
    assert 0 < share < 5
    data = (out / 'chart-ceilings.png').read_bytes()
    assert data[:8] == b'\x89PNG\r\n\x1a\n'


def test_postgres_reads_are_the_site_tables_beside_an_orm_schema(
        postgres_orm):
    """The scans a snapshot counts are of the site's own tables, though
    the ORM's schema has tables of the same names."""
    import asyncio
    import asyncpg
    from bench.ceilings.postgres_db import PostgresCeilings
    from data_interface.postgres.asyncpg_data import RANKED
    dsn = postgres_orm.owner_dsn
    snapshot = PostgresCeilings.snapshot

    async def ranked_reads():
        before = (await snapshot(None, dsn, dsn))['reads']['stickers']
        conn = await asyncpg.connect(dsn)
        for _ in range(5):
            await conn.fetch(RANKED[True] % 9)
        await conn.close()     # a backend reports its scans as it ends
        for _ in range(50):
            after = (await snapshot(None, dsn, dsn))['reads']['stickers']
            if after - before >= 5:
                break
            await asyncio.sleep(0.1)
        return after - before
    assert asyncio.run(ranked_reads()) >= 5


@pytest.mark.timeout(900)
@pytest.mark.bench
def test_a_ceiling_whose_calls_do_no_work_fails(tarantool, postgres_orm,
                                              tmp_path_factory):
    postgres = postgres_orm
    tools.need('wrk')
    out = tmp_path_factory.mktemp('ceilings-skip') / 'out'
    done = ceilings_bench(tarantool, postgres, out, env={SKIP_CALL: '1'},
                        flag='--limits')
    assert done.returncode == 1, done.stdout + done.stderr[-5000:]
    assert 'failed: ceilings' in done.stderr
    results = json.loads((out / 'results.json').read_text())
    runs = results['ceilings']['runs']
    assert {(r['database'], r['call']) for r in runs} == {
        (d, c) for d in ('tarantool', 'postgres') for c in CALLS}
    for r in runs:
        assert r['failure'], r
    # Failed inside the database, the calls are not tried again through the
    # drivers and HTTP: the run says so and ends sooner.
    assert {r['layer'] for r in runs} == {'database'}
    skipped = results['ceilings']['skipped']
    assert {(x['database'], x['layer']) for x in skipped if x['failed']} == {
        (d, 'drivers and http') for d in ('tarantool', 'postgres')}
    md = (out / 'results.md').read_text()
    assert '| ceilings | failed |' in md
    assert '⚠ postgres database vote: the vote total moved by 0' in md
