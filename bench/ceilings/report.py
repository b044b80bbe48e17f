"""The "Ceilings" section of results.md, and each engine's page ceiling for
the "share of the ceiling" column of the page tables."""
from runtime import engines
from ..tables import FLAG, number, table_md, us
from . import CALLS, PAGE_CALLS
from .run import DATABASES, ENGINE_DRIVERS, LAYERS

# Where each call serves: visits are written after the answer, in
# batches; /about's statistics are read every 5 s, not per request.
PAGES = {'ranked': 'good, bad', 'pair': 'index', 'vote': 'vote',
         'visits': 'good, bad, index (batched)', 'stats': 'about (every 5 s)'}
HEADERS = {'database': 'inside the database', 'asynctnt': 'asynctnt',
           'aiotarantool': 'aiotarantool', 'asyncpg': 'asyncpg',
           'http-async': 'HTTP async', 'http-sync': 'HTTP sync'}


def record(results):
    """What bench.py --ceilings measured, or None; results.json files
    before the rename have it under 'limits'."""
    return results.get('ceilings') or results.get('limits')


def runs(results):
    """{(database, layer, call): record}."""
    return {(r['database'], r['layer'], r['call']): r
            for r in (record(results) or {}).get('runs', [])}


def ceilings(results, page):
    """{engine name: the driver-alone rate of the page's call through the
    engine's driver} for the engines that have one."""
    call = PAGE_CALLS.get(page)
    found = runs(results)
    rates = {}
    for t in results['targets']:
        engine = engines.BY_NAME.get(t['name'].partition('@')[0])
        driver = engine and ENGINE_DRIVERS.get(engine.driver)
        if driver is None or call is None:     # --ceilings measures no Redis
            continue
        r = found.get((engines.database(engine), driver, call))
        if r and not r['failure'] and r['rate']:
            rates[t['name']] = r['rate']
    return rates


def cpu(r):
    """A record's CPU per call: the client's or the server's, then the
    database's."""
    mine = r.get('client_us', r.get('server_us'))
    if r['layer'] == 'database':
        return us(r.get('database_us'))
    return '%s + %s' % (us(mine), us(r.get('database_us')))


def section(results):
    measured = record(results)
    if not measured:
        return []
    found = runs(results)
    layers = [x for x in LAYERS if any(k[1] == x for k in found)]
    http = measured.get('http') or {}
    lines = [
        '', '## Ceilings', '',
        'Each database call of a page, timed alone for %d s: inside the '
        'database (Tarantool: the stored function called by %d fibers in a '
        'scratch instance holding the same data set; PostgreSQL: pgbench, '
        '%d connections, on the other core), through each driver alone '
        '(%d calls in flight, one connection; asyncpg: the site\'s pool), '
        'and through HTTP on %s with %s (%s): a page that makes just that '
        'call and answers a short text, loaded by wrk like the engines. '
        'Calls per '
        'second; the vote is the vote page\'s work (a vote, then the next '
        'pair); visits: %s visits per call. How to read it: '
        'docs/benchmark.md.' % (
            measured['seconds'], measured['fibers'], measured['pgbench_clients'],
            measured['in_flight'], http.get('framework', 'no server'),
            http.get('loop', 'no loop'), http.get('why', 'none runs here'),
            measured.get('visit_batch', 100)),
        '', '![ceilings](chart-ceilings.png)', '']
    rows, cpu_rows, notes = [], [], []
    for database in DATABASES:
        for call in CALLS:
            cells = [found.get((database, layer, call)) for layer in layers]
            if not any(cells):
                continue
            rows.append([database, call, PAGES[call]] + [
                '–' if r is None else number(r['rate'])
                + (' ' + FLAG if r['failure'] or r.get('flag') else '')
                for r in cells])
            cpu_rows.append([database, call] + [
                '–' if r is None else cpu(r) for r in cells])
            notes += ['%s %s %s %s: %s' % (FLAG, database, r['layer'], call,
                                           r['failure'] or r.get('flag'))
                      for r in cells if r and (r['failure'] or r.get('flag'))]
    headers = [HEADERS[x] for x in layers]
    lines += table_md(['database', 'call', 'pages'] + headers, rows)
    lines += ['', '### CPU per call, µs', '',
              'Inside the database: the database\'s CPU; drivers: the '
              'client process\'s, then the database\'s; HTTP: the server '
              'process\'s, then the database\'s.', '']
    lines += table_md(['database', 'call'] + headers, cpu_rows)
    renders = measured.get('renders') or {}
    if renders:
        lines += ['', '### Pages rendered in-process, no I/O', '',
                  'pages.Site\'s handler called in a loop over a data '
                  'interface that answers at once (a first visit each; the '
                  'vote with a session): the Python ceiling of a page.', '']
        lines += table_md(['page', 'pages/s'], [
            [page, number(r['rate'])] for page, r in renders.items()])
    notes += ['%s%s %s: %s' % (FLAG + ' ' if x.get('failed') else '',
                               x['database'], x['layer'],
                               x['why'].replace('\n', ' '))
              for x in measured.get('skipped', [])]
    return lines + ([''] + ['- ' + n for n in notes] if notes else [])
