"""results.md's "What the ORM costs": each ORM engine beside the engine of
the same framework, loop and connection mode on the raw driver its ORM
runs over, page by page: the capacity within the budget and the CPU per
request (server and database) at the capacity found."""
from runtime import engines
from . import tables
from .latency.cells import capacities

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


def rows(results):
    """[{'orm', 'raw', 'page', 'capacity': (orm, raw), 'cpu': (orm, raw)}]
    for each ORM engine and page the run has its raw engine on too."""
    found = capacities(results)
    pages = list(dict.fromkeys(p for _, p in found))
    out = []
    for name in dict.fromkeys(n for n, _ in found):
        raw = raw_of(name)
        for page in pages:
            if raw is None or (name, page) not in found \
                    or (raw, page) not in found:
                continue
            out.append({'orm': name, 'raw': raw, 'page': page,
                        'capacity': tuple(found[n, page]['rate']['median']
                                          for n in (name, raw)),
                        'cpu': tuple(cpu_us(results, n, page)
                                     for n in (name, raw))})
    return out


def share(orm, raw):
    """The share of the raw engine's figure the ORM gives up (capacity) or
    adds (CPU), in %, or None."""
    if orm is None or not raw:
        return None
    return (1.0 - orm / raw) * 100.0


def sentences(found):
    """One line per ORM engine: what its ORM costs its framework."""
    said = []
    for name in dict.fromkeys(r['orm'] for r in found):
        e = engines.BY_NAME[name]
        parts = ['%.0f %% on %s' % (share(*r['capacity']), '/' + r['page']
                                     if r['page'] != 'mix' else 'the mix')
                 for r in found if r['orm'] == name
                 and share(*r['capacity']) is not None]
        if parts:
            said.append('On PostgreSQL, %s costs %s (%s) %s of its capacity '
                        'within the budget.' % (
                            ORM_NAMES[e.driver], e.framework, name,
                            ', '.join(parts)))
    return said


def section(results):
    """results.md's "What the ORM costs", or []."""
    found = rows(results)
    if not found:
        return []
    table = [[r['orm'], r['raw'], r['page'],
              tables.number(r['capacity'][0]), tables.number(r['capacity'][1]),
              percent(share(*r['capacity'])),
              tables.number(r['cpu'][0]), tables.number(r['cpu'][1]),
              times(r['cpu'])] for r in found]
    return ['', '## What the ORM costs', '',
            'Each ORM engine beside the same framework on the driver its ORM '
            'runs over (same loop, same pool, same site, same data; the ORM on '
            "tables of its own, docs/databases.md): the capacity within the "
            'budget (median of the searches) and the CPU per request, server '
            'and database, at the capacity found. "capacity lost": the share '
            'of the raw engine\'s capacity the ORM gives up.', ''] + \
        tables.table_md(['ORM engine', 'raw engine', 'page', 'capacity',
                         'raw capacity', 'capacity lost', 'CPU µs',
                         'raw CPU µs', 'CPU ÷ raw'], table) + \
        [''] + sentences(found)


def percent(value):
    return '–' if value is None else '%.0f %%' % value


def times(pair):
    orm, raw = pair
    return '–' if not orm or not raw else '%.2f×' % (orm / raw)
