"""Demand per tier from a latency run's fixed-rate points: per engine and
page, the server's CPU per request and the database's, split into what runs
on its one serial thread (Tarantool's transaction thread, Redis's main
thread) and what spreads over cores, and the busy share of the run's core
at the highest rate that kept a budget (what advise sizes cores at).

Points recorded before the split (no 'demand', only us_per_request) give an
estimate, marked so: Tarantool's and Redis's whole database CPU counted as
their serial thread's (an upper bound), PostgreSQL's as spread (it has no
serial thread)."""
import statistics

from runtime import engines
from runtime.databases import table
from .. import storage
from . import budget

FIELDS = ('server_us', 'serial_us', 'spread_us', 'replicas_us', 'written_bytes',
          'shards_us', 'shards')
SERIAL = {'tarantool': 'transaction thread', 'redis': 'main thread',
          'rediscluster': "rankings' shard"}


def database_of(name):
    """'tarantool', 'postgres' or 'redis' of an engine's name, or None."""
    plain = storage.untag(name).partition('@')[0]
    engine = engines.BY_NAME.get(plain)
    if engine:
        return table.of(engine).name
    # a name of the usual shape (framework-database-mode...), not in the table
    parts = plain.split('-')
    return {'psycopg': 'postgres'}.get(parts[1], parts[1]) if len(parts) > 2 and \
        parts[1] in ('tarantool', 'postgres', 'psycopg', 'redis',
                     'rediscluster') else None


def of_point(record):
    """{field: value, 'split': 'measured' | 'estimated'} of one fixed-rate
    point, or None when it recorded no server CPU."""
    d = record.get('demand')
    if d and d.get('server_us') is not None:
        found = {f: d.get(f) for f in FIELDS}
        found['split'] = 'measured' if d.get('serial_us') is not None else None
        if database_of(record['target']) == 'rediscluster':
            found.update(cluster(d.get('nodes_us')))
        return found
    us = record.get('us_per_request') or {}
    if us.get('server') is None:
        return None
    db = us.get('database')
    serial = database_of(record['target']) in SERIAL
    return dict(dict.fromkeys(FIELDS), server_us=us['server'],
                serial_us=None if db is None else (db if serial else 0.0),
                spread_us=None if db is None else (0.0 if serial else db),
                split=None if db is None else 'estimated')


def cluster(nodes):
    """A Redis Cluster's primaries' main threads (µs per request each)
    split: the rankings' shard's own work (the busiest primary's, less a
    bucket shard's: it holds its share of the buckets too) as serial_us,
    and the buckets' work over all shards as shards_us (a bucket shard's
    times the primaries), which more shards divide. Nodes by role (a dict,
    see by_role) name the rankings' shard, and give its replicas' reads."""
    if isinstance(nodes, dict):
        return by_role(nodes)
    nodes = sorted(n for n in nodes or () if n is not None)
    if not nodes:
        return {'serial_us': None, 'shards_us': None, 'shards': None,
                'replicas_us': None, 'split': None}
    bucket = statistics.mean(nodes[:-1]) if len(nodes) > 1 else 0.0
    return {'serial_us': nodes[-1] - bucket, 'shards_us': bucket * len(nodes),
            'shards': len(nodes), 'replicas_us': None}


def by_role(nodes):
    """cluster() of {'ROLE PORT': µs} (ManagedCluster.roles): the rankings'
    primary less a bucket shard's, the buckets' over all primaries, and
    the catalogue's reads on the rankings' replicas (less what a bucket
    shard's replica does: copying its primary's writes) as replicas_us."""
    def of(role):
        return [v for k, v in nodes.items()
                if k.split()[0] == role and v is not None]
    rankings, shards = of('rankings'), of('shard')
    if not rankings:
        return cluster(())
    bucket = statistics.mean(shards) if shards else 0.0
    reads, copies = of('rankings-replica'), of('shard-replica')
    copy = statistics.mean(copies) if copies else 0.0
    return {'serial_us': max(0.0, rankings[0] - bucket),
            'shards_us': bucket * (1 + len(shards)), 'shards': 1 + len(shards),
            'replicas_us': max(0.0, sum(reads) - copy * len(reads))
            if reads else None}


def share(record):
    """The busy share of the server's core at a point: the server's CPU
    and its database's (they shared the core, unless the run put the
    database apart) over the point's seconds, at most 1; None when not
    recorded."""
    cpu = record.get('cpu_s') or {}
    seconds = (record.get('oha') or {}).get('seconds')
    if cpu.get('server') is None or not seconds:
        return None
    database = 0.0 if cpu.get('database_apart') else cpu.get('database') or 0.0
    return min(1.0, (cpu['server'] + database) / seconds)


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def merged(found):
    """Medians of the points' figures (their split: the weakest)."""
    out = {f: median([p[f] for p in found]) for f in FIELDS}
    splits = {p['split'] for p in found}
    out['split'] = (None if None in splits or not splits else
                    'estimated' if 'estimated' in splits else 'measured')
    out['points'] = len(found)
    return out


def missed(record, slo):
    check = record.get('vote_check') or {'ok': True}
    if not check['ok']:
        return check['reason']
    return budget.verdict(record.get('oha'), slo)


def offered_of(record):
    return record.get('offered') or (record.get('oha') or {}).get('offered')


def at_capacity(results, name, page, slo):
    """Per run, the points at the highest rate that kept slo below the
    lowest that missed it; over the runs, the medians of their demand and
    of the core's busy share ('share'), and the rate ('rate'). None when
    no run kept any rate."""
    runs = {}
    for r in results.get('latency') or []:
        if r.get('target') == name and r.get('page') == page:
            runs.setdefault((r.get('pair'), r.get('run')), []).append(r)
    chosen, rates = [], []
    for records in runs.values():
        offered = [(offered_of(r), missed(r, slo) is None) for r in records]
        lo, _ = budget.bracket(offered)
        if lo is None:
            continue
        rates.append(lo)
        chosen += [r for r in records if offered_of(r) == lo
                   and missed(r, slo) is None]
    points = [p for p in map(of_point, chosen) if p]
    if not points:
        return None
    found = merged(points)
    found['share'] = median([share(r) for r in chosen])
    found['rate'] = median(rates)
    return found


def served(record):
    """Whether a point served what was asked (no errors, the rate offered
    achieved, a mix's votes adding up), whatever its latency: its CPU per
    request is a figure at that rate."""
    check = record.get('vote_check') or {'ok': True}
    return bool(check['ok']) and budget.served(record.get('oha')) is None


def curve(results, name, page):
    """[{'rate', the medians of FIELDS, 'points'}] by offered rate, lowest
    first: the demand per tier at each rate the run served (at least one
    point of it)."""
    rates = {}
    for r in results.get('latency') or []:
        if r.get('target') == name and r.get('page') == page and served(r):
            found = of_point(r)
            if found and offered_of(r):
                rates.setdefault(offered_of(r), []).append(found)
    out = []
    for rate, found in sorted(rates.items()):
        point = {f: median([p[f] for p in found]) for f in FIELDS}
        point.update(rate=rate, points=len(found))
        out.append(point)
    return out


def summary(results):
    """[{target, page, database, the medians of FIELDS over the kept
    points, split, points, at_capacity under the run's budget, and the
    curve: the demand at each rate served}]."""
    lat = (results.get('settings') or {}).get('latency') or {}
    slo = lat.get('slo')
    groups = {}
    for r in results.get('latency') or []:
        if slo and missed(r, slo) is None:
            groups.setdefault((r['target'], r['page']), []).append(r)
    out = []
    for (name, page), records in sorted(groups.items()):
        points = [p for p in map(of_point, records) if p]
        if not points:
            continue
        found = merged(points)
        found.update(target=name, page=page, database=database_of(name),
                     at_capacity=at_capacity(results, name, page, slo),
                     curve=curve(results, name, page))
        out.append(found)
    return out


def check(results, entry):
    """The model at one core against the run: (predicted saturation,
    measured; predicted capacity within the budget, measured), predicted
    from the demand at the capacity found (what advise sizes from), the
    capacity at its busy share u."""
    at = entry.get('at_capacity') or {}
    total = sum(at.get(f) or 0 for f in
                ('server_us', 'serial_us', 'spread_us', 'shards_us')
                + (('replicas_us',) if at.get('shards_us') else ()))
    found = [c for c in results.get('capacity') or []
             if c.get('target') == entry['target'] and c.get('page') == entry['page']]
    saturation = median([c.get('saturation') for c in found])
    capacity = median([c.get('rate') for c in found])
    if not total:
        return None
    workers = (results.get('settings') or {}).get('workers') or 1
    return (1e6 * workers / total, saturation,
            at.get('share') and at['share'] * 1e6 / total, capacity)


def section(results, names):
    """results.md's demand per tier and the model's check, or []."""
    kinds = {t['name']: t.get('kind') for t in results.get('targets') or []}
    entries = [e for e in summary(results) if e['target'] in names
               and kinds.get(e['target']) == 'engine']
    if not entries:
        return []
    us = lambda v: '–' if v is None else '{:,.0f}'.format(v)  # noqa: E731
    rows, checks = [], []
    for e in entries:
        at = e.get('at_capacity')
        if not at:
            continue
        rows.append([e['target'], e['page'], us(at['rate']), str(at['points']),
                     us(at['server_us']),
                     us(at['serial_us']) if e['database'] in SERIAL else '–',
                     us(at['spread_us']), us(at['shards_us']) if at['shards_us'] else '–',
                     us(at['replicas_us']) if at['replicas_us'] else '–',
                     us(at['written_bytes']), at['split'] or 'not read',
                     '–' if at.get('share') is None else '%.0f %%' % (at['share'] * 100)])
        found = check(results, e)
        if found:
            ratio = lambda a, b: '–' if not a or not b else '%.2f' % (b / a)  # noqa: E731
            checks.append([e['target'], e['page'], us(found[0]), us(found[1]),
                           ratio(found[0], found[1]), us(found[2]), us(found[3]),
                           ratio(found[2], found[3])])
    from ..tables import table_md
    lines = ['', '## Demand per tier', '',
             'CPU µs per request at the capacity found, what `bench.py advise` '
             'sizes from: per search, the points at the highest rate that kept '
             'the budget below the lowest that missed it; the medians over the '
             "searches (at: the rate, their median): the server's; the "
             "database's on its serial thread "
             "(Tarantool's transaction thread, Redis's main thread, a Redis "
             "Cluster's rankings' shard's own: one core at most, whatever the "
             "app cores) and spread over cores (PostgreSQL's processes, "
             "Tarantool's other threads); a Redis Cluster's bucket shards' (on "
             "the main threads of the primaries, divided by more shards); its "
             "read replicas'; bytes it wrote to storage per request (its WAL or AOF: "
             'a proxy for the flush or fsync a vote waits for, which is not '
             "CPU). split: measured per thread, or estimated (a run before the "
             "split: Tarantool's and Redis's whole CPU counted on the serial "
             "thread). u: the busy share of the run's core (server + database) "
             'there, what advise sizes each tier at.', ''] + table_md(
        ['engine', 'page', 'at, req/s', 'points', 'server µs', 'serial µs', 'spread µs',
         'shards µs', 'replicas µs', 'written B', 'split', 'u'], rows)
    curves = [[e['target'], e['page'], ' · '.join(
        '%s: %s/%s' % ('{:,.0f}'.format(c['rate']), us(c['server_us']),
                       us(c['serial_us']) if e['database'] in SERIAL else '–')
        for c in e.get('curve') or ())] for e in entries
        if len(e.get('curve') or ()) > 1]
    if curves:
        lines += ['', 'The demand curve: at each rate a point served (whatever '
                  "its latency), the server's µs per request / the serial "
                  "thread's (`demand.curve` in results.json). advise reads a "
                  "server process's at an app core's own rate and the "
                  "database's at the site's.", ''] + table_md(
            ['engine', 'page', 'rate/s: server/serial µs'], curves)
    if checks:
        lines += ['', 'The model at one core: predicted from the demand above '
                  '(server + database µs per request at the capacity found), '
                  'against what the run measured on that core. Capacity: the '
                  'core at u, against the capacity within the budget: near 1, '
                  'the demand being read there (a check that the figures agree). '
                  'Saturation: a core 100 % busy, against the closed-loop rate: '
                  'measured ÷ predicted above 1 where the demand per request '
                  'falls further as the load rises (more work per wakeup); '
                  'advise reads the curve above instead of this one point.', '']
        lines += table_md(['engine', 'page', 'saturation predicted', 'measured',
                           'ratio', 'capacity predicted', 'measured', 'ratio'],
                          checks)
    return lines
