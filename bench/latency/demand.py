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

FIELDS = ('server_us', 'serial_us', 'spread_us', 'replicas_us', 'written_bytes')
SERIAL = {'tarantool': 'transaction thread', 'redis': 'main thread'}


def database_of(name):
    """'tarantool', 'postgres' or 'redis' of an engine's name, or None."""
    plain = storage.untag(name).partition('@')[0]
    engine = engines.BY_NAME.get(plain)
    if engine:
        return table.of(engine).name
    # a name of the usual shape (framework-database-mode...), not in the table
    parts = plain.split('-')
    return {'psycopg': 'postgres'}.get(parts[1], parts[1]) if len(parts) > 2 and \
        parts[1] in ('tarantool', 'postgres', 'psycopg', 'redis') else None


def of_point(record):
    """{field: value, 'split': 'measured' | 'estimated'} of one fixed-rate
    point, or None when it recorded no server CPU."""
    d = record.get('demand')
    if d and d.get('server_us') is not None:
        found = {f: d.get(f) for f in FIELDS}
        found['split'] = 'measured' if d.get('serial_us') is not None else None
        return found
    us = record.get('us_per_request') or {}
    if us.get('server') is None:
        return None
    db = us.get('database')
    serial = database_of(record['target']) in SERIAL
    return {'server_us': us['server'],
            'serial_us': None if db is None else (db if serial else 0.0),
            'spread_us': None if db is None else (0.0 if serial else db),
            'replicas_us': None, 'written_bytes': None,
            'split': None if db is None else 'estimated'}


def share(record):
    """The busy share of the run's core at a point: the server's CPU and
    its database's (they shared the core) over the point's seconds, at
    most 1; None when not recorded."""
    cpu = record.get('cpu_s') or {}
    seconds = (record.get('oha') or {}).get('seconds')
    if cpu.get('server') is None or not seconds:
        return None
    return min(1.0, (cpu['server'] + (cpu.get('database') or 0.0)) / seconds)


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
        offered = [(r.get('offered'), missed(r, slo) is None) for r in records]
        lo, _ = budget.bracket(offered)
        if lo is None:
            continue
        rates.append(lo)
        chosen += [r for r in records if r.get('offered') == lo
                   and missed(r, slo) is None]
    points = [p for p in map(of_point, chosen) if p]
    if not points:
        return None
    found = merged(points)
    found['share'] = median([share(r) for r in chosen])
    found['rate'] = median(rates)
    return found


def summary(results):
    """[{target, page, database, the medians of FIELDS over the kept
    points, split, points, and at_capacity under the run's budget}]."""
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
                     at_capacity=at_capacity(results, name, page, slo))
        out.append(found)
    return out
