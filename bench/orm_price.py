"""results.md's "What the ORM costs": each ORM engine beside the engine of
the same framework, loop and connection mode on the raw driver its ORM
runs over, page by page: the closed-loop rate, the capacity within the
budget and the CPU per request (server and database) at the capacity
found."""
from runtime import engines
from . import tables
from .latency import budget
from .latency.cells import capacities
from .stats import median

# An ORM's driver -> the raw driver it runs over (SQLAlchemy's asyncio ORM
# over asyncpg, Django's over psycopg 3).
RAW = {'sqlalchemy': 'postgres', 'django': 'psycopg'}
ORM_NAMES = {'sqlalchemy': "SQLAlchemy's ORM", 'django': "Django's ORM"}
TIERS = ('server_us', 'serial_us', 'spread_us', 'replicas_us')


def raw_of(name):
    """The raw-driver engine an ORM engine is priced against, or None."""
    e = engines.BY_NAME.get(name)
    if e is None or e.driver not in RAW:
        return None
    return name.replace('-%s-' % e.driver, '-%s-' % RAW[e.driver], 1)


def cpu_us(results, name, page):
    """Server + database µs per request at the capacity found, or None."""
    for d in results.get('demand') or ():
        if (d['target'], d['page']) == (name, page):
            at = d.get('at_capacity') or d
            return sum(at.get(t) or 0.0 for t in TIERS)
    return None


def closed_loop(results, table, name, page):
    """The closed-loop median requests/s (plain; the mix: loadgen's
    visitors back to back), or None."""
    if page == 'mix':
        rates = [(s.get('oha') or {}).get('achieved') for s in
                 results.get('saturation') or () if s.get('target') == name]
        rates = [r for r in rates if r is not None]
        return median(rates) if rates else None
    return (table.get((name, page, 'plain')) or {}).get('rps')


def rows(results):
    """[{'orm', 'raw', 'page', 'closed', 'capacity', 'below', 'cpu'}], each
    an (ORM engine's, raw engine's) pair, for each ORM engine and page the
    run has its raw engine on too."""
    found = capacities(results)
    table = tables.cells(results) if results.get('runs') else {}
    pages = list(dict.fromkeys(p for _, p in found))
    out = []
    for name in dict.fromkeys(n for n, _ in found):
        raw = raw_of(name)
        for page in pages:
            if raw is None or (name, page) not in found \
                    or (raw, page) not in found:
                continue
            pair = (name, raw)
            out.append({'orm': name, 'raw': raw, 'page': page,
                        'closed': tuple(closed_loop(results, table, n, page)
                                        for n in pair),
                        'capacity': tuple(found[n, page]['rate']['median']
                                          for n in pair),
                        'below': tuple(found[n, page].get('below')
                                       for n in pair),
                        'cpu': tuple(cpu_us(results, n, page) for n in pair)})
    return out


def share(orm, raw):
    """The share of the raw engine's figure the ORM gives up, in %, or
    None."""
    if orm is None or not raw:
        return None
    return (1.0 - orm / raw) * 100.0


def page_name(page):
    return {'index': '/', 'mix': 'the mix'}.get(page, '/' + page)


def lost_text(r, key):
    """The share lost as text: '66 %'; '≥ 86 %' where the ORM engine kept
    no rate tried; None when there is no raw figure."""
    if key == 'capacity' and not r['capacity'][0] and r['below'][0]:
        got = share(r['below'][0], r['capacity'][1])
        return None if got is None else '≥ %.0f %%' % max(got, 0.0)
    got = share(*r[key])
    return None if got is None else '%.0f %%' % got


def lost(found, name, key):
    """'x % on /good, y % on the mix' of one ORM engine's figure key; not
    /ugly, which touches no database (its row shows the run's noise)."""
    return ', '.join('%s on %s' % (lost_text(r, key), page_name(r['page']))
                     for r in found if r['orm'] == name and r['page'] != 'ugly'
                     and lost_text(r, key) is not None)


def sentences(found, slo):
    """One line per ORM engine: what its ORM costs its framework."""
    said = []
    for name in dict.fromkeys(r['orm'] for r in found):
        e = engines.BY_NAME[name]
        parts = [x for x in (
            lost(found, name, 'closed') and '%s of its closed-loop rate'
            % lost(found, name, 'closed'),
            lost(found, name, 'capacity') and '%s of its capacity within %s'
            % (lost(found, name, 'capacity'), slo)) if x]
        if parts:
            said.append('On PostgreSQL, %s costs %s (%s) %s.' % (
                ORM_NAMES[e.driver], e.framework, name, '; '.join(parts)))
    return said


def capacity(r, i):
    """An engine's capacity; '< N' where it kept no rate tried (N the
    highest its searches missed at)."""
    if not r['capacity'][i] and r['below'][i]:
        return '< ' + tables.number(r['below'][i])
    return tables.number(r['capacity'][i])


def section(results):
    """results.md's "What the ORM costs", or []."""
    found = rows(results)
    if not found:
        return []
    lat = results['settings'].get('latency') or {}
    slo = budget.label(lat['slo']) if lat.get('slo') else 'the budget'
    table = [[r['orm'], r['raw'], r['page'],
              tables.number(r['closed'][0]), tables.number(r['closed'][1]),
              lost_text(r, 'closed') or '–', capacity(r, 0), capacity(r, 1),
              lost_text(r, 'capacity') or '–',
              tables.number(r['cpu'][0]), tables.number(r['cpu'][1]),
              times(r['cpu'])] for r in found]
    return ['', '## What the ORM costs', '',
            'Each ORM engine beside the same framework on the driver its ORM '
            'runs over (same loop, same pool, same site, same data; the ORM on '
            "tables of its own, docs/databases.md): the closed-loop rate "
            '(median requests/s), the capacity within %s (median of the '
            'searches; "< N": no rate tried held, N the highest missed) and '
            'the CPU per request, server and database, at the capacity found. '
            '"lost": the share of the raw engine\'s figure the ORM gives up. '
            '/ugly touches no database: its row shows how far two runs of the '
            'same work differ here.' % slo, ''] + \
        tables.table_md(['ORM engine', 'raw engine', 'page', 'closed loop',
                         'raw closed loop', 'lost', 'capacity',
                         'raw capacity', 'lost', 'CPU µs', 'raw CPU µs',
                         'CPU ÷ raw'], table) + \
        [''] + sentences(found, slo)


def times(pair):
    orm, raw = pair
    return '–' if not orm or not raw else '%.2f×' % (orm / raw)
