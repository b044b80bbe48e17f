"""bench.py advise RESULTS --rate N: one site per engine of a --latency run
for N requests/s within the latency budget: its cores, the database's
layout, what stops it first, what it costs a month and its memory. The
run's own core where the run served the rate (measured), else sized from
the demand per tier the run measured (bench/sizing.py, modelled); where
one primary's serial thread cannot take the rate, said instead. Measured
first, then by cores.

    python bench.py advise RESULTS --rate N [--slo p99=10ms]
                           [--workload mix|PAGE] [--price DOLLARS-A-MONTH |
                            --core-hour-price DOLLARS]
                           [--headroom SHARE] [--max-cores N]
                           [--database NAME] [--framework NAME]

RESULTS: a results folder or its results.json."""
import argparse
import math
import re
import sys
import textwrap

from . import sizing, storage
from .compare import commit, load
from .latency import budget, demand, floor, mixed
from .latency.cells import capacities
from .latency.noise import NOISE, noisy, triple
from .latency.oha import FIGURES

# An assumption, not a quote: about what one vCPU-hour costs on demand at a
# large cloud (a general-purpose instance's hourly price / its vCPUs).
PRICE = 0.04
SOURCE = "an assumption: about a large cloud's on-demand vCPU-hour"
HOURS = sizing.HOURS
MAX_CORES = 64
# The most requests/s asked: past it the answer is thousands of cores of
# arithmetic, not a site anyone sizes from a one-core run.
MAX_RATE = 10000000
PROG = 'bench.py advise'


class Refused(Exception):
    """A one-line answer instead of a table; code: the exit status."""

    def __init__(self, message, code=2):
        Exception.__init__(self, message)
        self.code = code


def engines(results):
    """Names of the run's engines (not the hello references, nginx or a
    site started elsewhere: they do not serve this site from our cores)."""
    return [t['name'] for t in results.get('targets') or []
            if t.get('kind') == 'engine']


def framework_of(name):
    return storage.untag(name).partition('@')[0].split('-')[0]


def chosen(names, database=None, framework=None):
    """The engines of the run on that database and framework (each None:
    any); Refused, naming those present, when none is."""
    for what, of, asked in (('database', demand.database_of, database),
                            ('framework', framework_of, framework)):
        if asked is None:
            continue
        present = sorted({of(n) or '–' for n in names})
        names = [n for n in names if of(n) == asked]
        if not names:
            raise Refused('no engine on %s %r in these results; present: %s'
                          % (what, asked, ', '.join(present)))
    return names


def run_slo(results):
    lat = (results.get('settings') or {}).get('latency')
    if not lat or not results.get('capacity'):
        raise Refused('no latency data in these results (run bench.py --latency)')
    return lat['slo']


def workload_of(results, asked):
    """The page or mix whose capacities to use: asked, else mix when the
    run has it, else its only page."""
    present = sorted({page for (name, page) in capacities(results)
                      if name in engines(results)})
    if asked is None:
        if mixed.PAGE in present or len(present) == 1:
            return mixed.PAGE if mixed.PAGE in present else present[0]
        raise Refused('choose a workload with --workload: %s' % ', '.join(present))
    if asked not in present:
        raise Refused('no capacity for workload %r in these results; present: %s'
                      % (asked, ', '.join(present) or 'none'))
    return asked


def missed(record, slo):
    """Why a fixed-rate point misses slo (budget.verdict, and a mix's vote
    check), None when it keeps it."""
    check = record.get('vote_check') or {'ok': True}
    if not check['ok']:
        return check['reason']
    return budget.verdict(record.get('oha'), slo)


def reread(results, page, slo):
    """Capacities under another budget, read from the run's fixed-rate
    points (its rate steps and probes) as its search reads them: per run
    the highest rate kept below the lowest missed, then their median."""
    points, slow = {}, {}
    for r in results.get('latency') or []:
        if r['page'] == page:
            offered = r.get('offered') or (r.get('oha') or {}).get('offered')
            key = (r['target'], r.get('pair'), r['run'])
            points.setdefault(key, []).append((offered, missed(r, slo) is None))
            slow.setdefault(key + (offered,), []).append(
                bool((r.get('host') or {}).get('slow')))
    runs = {}
    for key, found in points.items():
        c = budget.capacity(found)
        c['host'] = all(slow.get(key + (c['missed_at'],)) or [False])
        runs.setdefault(key[0], []).append(c)
    return {name: {'rate': triple([c['rate'] for c in found]),
                   'open': any(c['open'] for c in found),
                   'noisy': noisy([c['rate'] for c in found]),
                   'host': sum(c['host'] for c in found)}
            for name, found in runs.items()}


def memory_mib(target, cores, workers):
    """MiB for `cores` server processes and the database, from the run's
    RSS after load (a process's share of it with --workers), or None."""
    m = (target or {}).get('memory') or {}
    if not cores or not m.get('server_peak_kib'):
        return None
    kib = cores * m['server_peak_kib'] / workers + (m.get('database_peak_kib') or 0)
    return kib / 1024.0


def memory_of(target, workers):
    """{'server_kib' per process, 'database_kib', 'pss'} from the run's
    memory after load: PSS where measured (shared pages once), else RSS."""
    m = (target or {}).get('memory') or {}
    pss = bool(m.get('server_peak_pss_kib'))
    server = m.get('server_peak_pss_kib') or m.get('server_peak_kib')
    if not server:
        return None
    return {'server_kib': server / float(workers), 'pss': pss,
            'database_kib': (m.get('database_peak_pss_kib') if pss
                             else m.get('database_peak_kib'))}


def replica_run(results, name, page, slo):
    """The demand of the same engine run with read replicas, or None."""
    for t in results.get('targets') or []:
        other = t['name']
        tags = [x for x in storage._tags(other)
                if not x.endswith(('replica', 'replicas'))]
        if storage.replicas_of(other) and storage.retagged(other, tags) == name:
            found = demand.at_capacity(results, other, page, slo)
            if found and found.get('replicas_us'):
                return dict(found, curve=demand.curve(results, other, page))
    return None


def row(name, found, rate, workers, price, max_cores, target=None,
        results=None, page=None, slo=None, headroom=sizing.HEADROOM):
    """One engine's figures: capacity per core, and its site: the run's own
    cores where the run served the rate within the budget (measured), else
    sized from its demand per tier (sizing.size) where the run measured it,
    else cores from its capacity alone, with the database not sized (both
    modelled)."""
    capacity = found['rate']['median'] or 0.0
    per_core = capacity / workers
    notes = capacity_notes(found)
    if capacity >= rate and workers <= max_cores:
        return measured(name, per_core, capacity, rate, workers, price,
                        target, notes)
    d = demand.at_capacity(results, name, page, slo) if results else None
    if d and d.get('share') and d.get('server_us') and per_core:
        return sized(name, per_core, d, rate, workers, price, max_cores,
                     target, results, page, slo, notes, headroom)
    cores = int(math.ceil(rate / per_core / headroom - 1e-9)) if per_core else None
    first = '–'
    if not per_core:
        notes.append('kept the budget at no rate tried')
    elif cores > max_cores:
        notes.append('needs %d cores, more than --max-cores %d' % (cores, max_cores))
        first = 'needs %d cores' % cores
    else:
        first = '%d cores at %s/s' % (max_cores, sizing.per_s(
            max_cores * per_core * headroom))
        notes.append('modelled: linear from %s, each core at %d %% of its '
                     'capacity' % (sizing.plural(workers, 'core'),
                                   sizing.pct(headroom)))
    if per_core:
        notes.append('no CPU per request in the run: cores from capacity '
                     'alone, the database not sized')
    total = cores
    if cores and cores > max_cores:
        cores = None
    monthly = cores * HOURS * price if cores else None
    per_million = cores * million_price(price, rate) if cores else None
    return {'engine': name, 'per_core': per_core, 'cores': cores,
            'basis': 'modelled', 'total': total, 'limit': first,
            'app': cores, 'database': '–', 'sized': False,
            'monthly': monthly, 'per_million': per_million,
            'memory_mib': memory_mib(target, cores, workers), 'notes': notes}


def capacity_notes(found):
    """What the searches say of a capacity: open, spread, stopped by the host."""
    notes = []
    if found['open']:
        notes.append('capacity at least this: kept the budget at every rate tried')
    if found['noisy']:
        notes.append("runs %s–%s/s (spread > %d%%)" % (
            '{:,.0f}'.format(found['rate']['min']),
            '{:,.0f}'.format(found['rate']['max']), NOISE * 100))
    if found.get('host'):
        notes.append('%d of %d searches stopped where only a slow host missed'
                     % (found['host'], found['rate']['runs']))
    return notes


def measured(name, per_core, capacity, rate, workers, price, target, notes):
    """The run's own site: it served `capacity` within the budget on its
    `workers` cores, server and database together."""
    kind = demand.database_of(name)
    memory = memory_of(target, workers)
    notes = notes + ['measured: the run served %s/s within the budget on %s, '
                     'server and database sharing %s' % (
                         '{:,.0f}'.format(capacity), sizing.plural(workers, 'core'),
                         'it' if workers == 1 else 'them')]
    return {'engine': name, 'per_core': per_core, 'cores': workers,
            'basis': 'measured', 'total': workers,
            'limit': 'measured to %s/s' % sizing.per_s(capacity),
            'app': workers, 'sized': False,
            'database': "the run's cluster" if kind == 'rediscluster'
            else sizing.layout(kind, 0),
            'monthly': workers * HOURS * price,
            'per_million': workers * million_price(price, rate),
            'memory_mib': None if not memory else (
                workers * memory['server_kib'] + (memory['database_kib'] or 0)) / 1024.0,
            'pss': bool(memory and memory['pss']), 'notes': notes}


def sized(name, per_core, d, rate, workers, price, max_cores, target,
          results, page, slo, notes, headroom):
    d = dict(d, database=demand.database_of(name),
             share=min(1.0, d['share'] / workers), workers=workers,
             curve=demand.curve(results, name, page))
    if d['database'] == 'rediscluster' and page == mixed.PAGE:
        if results.get('cluster_batches'):
            d['rankings'] = sizing.rankings_curve(results['cluster_batches'])
        else:
            notes = notes + ["the rankings' shard from the run's own points: the "
                             'run carries no bench.py cluster-batches figures (its '
                             "votes' batches at higher rates)"]
    replica = replica_run(results, name, page, slo)
    if storage.replicas_of(name):
        replica = d
    memory = memory_of(target, workers)
    site = sizing.size(rate, d, price, max_cores, replica, memory, headroom,
                       disk_rate(results))
    notes = site['notes'] + notes
    notes.append('modelled: %s%s, each at %d %% busy (%d %% of the %.0f %% '
                 'its core was at %s/s, keeping the budget); %s' % (
                     '' if site['cores'] else 'would be ',
                     sizing.plural(site['total'], 'core'),
                     sizing.pct(headroom * d['share']), sizing.pct(headroom),
                     d['share'] * 100, '{:,.0f}'.format(d['rate']),
                     points_said(site['read_at'], d)))
    if d['split'] == 'estimated' and d['database'] in sizing.THREAD:
        notes.append('split estimated: the run recorded the database\'s CPU '
                     'whole, all counted on its %s (an upper bound)'
                     % sizing.THREAD[d['database']])
    if d['database'] in sizing.THREAD and not site['replicas'] and not replica \
            and site['cores'] is not None:
        notes.append('read replicas not measured in this run')
    cores = site['cores']
    return {'engine': name, 'per_core': per_core, 'cores': cores,
            'basis': 'modelled', 'sized': True,
            'app': site['app'], 'database': site['database'],
            'limit': site['limit'], 'total': site['total'],
            'monthly': site['monthly'],
            'per_million': cores * million_price(price, rate) if cores else None,
            'memory_mib': (None if site['memory_kib'] is None
                           else site['memory_kib'] / 1024.0),
            'pss': bool(memory and memory['pss']), 'notes': notes}


def points_said(points, d):
    """Where each tier's CPU per request comes from."""
    curve = [p for p in points or () if p[0] != 'rankings']
    ranked = [p for p in points or () if p[0] == 'rankings']
    read = dict(d, **{f: us for f, us, _, _ in curve})
    if ranked:
        read['serial_us'] = ranked[0][1]
    if not curve:
        said = ('CPU µs per request at that one point (the run holds no curve '
                'of two rates or more): server %.0f, database %s' % (
                    read['server_us'], database_us(read)))
    else:
        lo, hi = ('{:,.0f}'.format(d['curve'][i]['rate']) for i in (0, -1))
        rates = {f: '{:,.0f}'.format(rate) for f, _, rate, _ in points}
        hows = {how for *_, how in curve}
        said = ("CPU µs per request on the run's curve (%s–%s/s): server %.0f at "
                "%s/s (an app core's rate: its own capacity, at most the site's)"
                % (lo, hi, read['server_us'], rates.get('server_us')))
        if len(points) > 1:
            said += ", database %s at %s/s (the site's rate)" % (
                database_us(read), rates[points[-1][0]])
        if 'beyond' in hows:
            said += ('; past %s/s, the highest rate measured, each held at its '
                     'figure there: modelled' % hi)
        if 'below' in hows:
            said += '; below %s/s, the lowest rate measured, held at its figure there' % lo
    if ranked:
        _, us, rate, how = ranked[0]
        said += ("; the rankings' shard's %.0f µs per mix request at %s/s, one "
                 "server's rate, from bench.py cluster-batches (each server's votes in "
                 'batches of %.0f there%s)' % (
                     us, '{:,.0f}'.format(rate), sizing.at(d['rankings'], rate, 'batch')[0],
                     ': past the highest rate cast, held, modelled' if how == 'beyond'
                     else ''))
    return said


def disk_rate(results):
    """The disk's write rate (bytes/s) the run measured at its start, or
    None."""
    return ((results.get('machine') or {}).get('disk') or {}).get('bytes_per_s')


def database_us(d):
    if d.get('serial_us') is None:
        return 'not read'
    if d.get('shards_us') is not None:
        reads = '' if d.get('replicas_us') is None else \
            ' + %.0f on its replicas' % d['replicas_us']
        return "%.0f on the rankings' shard%s + %.0f over %d bucket shards" % (
            d['serial_us'], reads, d['shards_us'], d.get('shards') or 0)
    if d['database'] in sizing.THREAD:
        return '%.0f on its %s + %.0f' % (d['serial_us'], sizing.THREAD[d['database']],
                                          d.get('spread_us') or 0)
    return '%.0f' % ((d.get('serial_us') or 0) + (d.get('spread_us') or 0))


def million_price(price, rate):
    """$ per million requests of one core-hour at `price` serving `rate`
    requests/s."""
    return price / (rate * 3600.0) * 1e6


def advise(results, rate, slo=None, workload=None, price=PRICE,
           max_cores=MAX_CORES, headroom=sizing.HEADROOM, database=None,
           framework=None):
    """(header lines, rows: measured first, then by cores, then capacity);
    Refused when no engine can serve the rate within max_cores."""
    measured = run_slo(results)
    page = workload_of(results, workload)
    slo = slo or measured
    names = chosen(engines(results), database, framework)
    if (slo['percentile'] == measured['percentile']
            and math.isclose(slo['ms'], measured['ms'])):
        found = {n: c for (n, p), c in capacities(results).items() if p == page}
        how = ("the median of the run's searches for the highest rate whose "
               '%s stayed within %g ms with no errors' % (slo['percentile'], slo['ms']))
    else:
        found = reread(results, page, slo)
        if found and not any(c['rate']['median'] for c in found.values()):
            raise Refused('capacity within %s was not measured: no rate the run '
                          'tried kept it (it searched at %s)'
                          % (budget.label(slo), budget.label(measured)))
        if not found:
            raise Refused('capacity within %s was not measured: the run searched '
                          'at %s and holds no fixed-rate points of %s to read it from'
                          % (budget.label(slo), budget.label(measured), page))
        how = ('read again from the fixed-rate points of a run searched at %s, '
               'not searched at %s itself: the highest rate tried that kept it '
               'below the lowest that missed it, median of the runs (as coarse '
               'as the rates tried)' % (budget.label(measured), budget.label(slo)))
    workers = (results.get('settings') or {}).get('workers') or 1
    by_name = {t['name']: t for t in results.get('targets') or []}
    rows = [row(n, found[n], rate, workers, price, max_cores, by_name.get(n),
                results, page, slo, headroom)
            for n in names if n in found]
    for r in rows:
        r['rate'] = rate
    rows.sort(key=lambda r: (r['cores'] is None, r['basis'] != 'measured',
                             r['cores'] or 0, -r['per_core']))
    if not any(r['cores'] for r in rows):
        raise Refused(refusal(rows, rate, page, slo, max_cores), code=1)
    scaling = ('more cores assumed to scale linearly, NOT measured: the run '
               'had one server process per engine' if workers == 1 else
               'measured with %d server processes per engine (--workers): '
               'capacity/core = capacity / %d; beyond %d cores assumed linear, '
               'not measured' % (workers, workers, workers))
    pss = [r for r in rows if r['memory_mib'] and r.get('pss')]
    header = [
        '%s requests/s of %s within %s' % ('{:,.0f}'.format(rate), page,
                                           budget.label(slo)),
        'From: %s run, commit %s' % (results.get('started'), commit(results)),
        'Capacity: %s. A core: the one a server process and the database it '
        'started shared in the run.' % how,
        'Measured: a stack whose capacity is at least the rate: the run served '
        'it on %s, server and database together.' % sizing.plural(workers, 'core'),
        'Modelled: the others. Scaling: %s.' % scaling]
    if any(r.get('sized') for r in rows):
        header += [
            "Sizing: the tiers' CPU per request, summed (server, the database, "
            "its replicas), each read on the run's curve where the site runs it "
            "(a server process at an app core's own rate, the database at the "
            "site's; held past the highest rate measured: modelled), on cores "
            "shared as in the run, each core at %d %% (--headroom) of u, the run's "
            "core's busy share at the capacity found; the site rounded to whole "
            'cores.' % sizing.pct(headroom),
            "A database's serial thread (Tarantool's transaction thread, "
            "Redis's main thread) is one thread: it must stay within that "
            'share of one core at the rate, however many cores the site has.',
            'Not modelled: the network between tiers, locks and WAL waits '
            "(PostgreSQL's row locks on a vote's counters included).",
            'First limit: what stops the site first as the rate rises: its '
            'serial thread, or --max-cores.']
    header += [
        'Cost: cores x %d h x $%g per core-hour (%s) = $%.2f a core-month; '
        '$/M requests at %s/s: the site\'s whole cores at that steady rate '
        "(results.md's cost table: one core at its capacity)." % (
            HOURS, price, 'an assumed on-demand vCPU price'
            if math.isclose(price, PRICE) else 'as given', price * HOURS,
            sizing.per_s(rate)),
        ('Memory: the site\'s server processes (one a core) and the database, each as '
         'the run measured it after its load (%s); more processes assumed to '
         'take as much each, not measured.' % (
             'PSS: shared pages counted once' if pss and len(pss) == len(
                 [r for r in rows if r['memory_mib']]) else
             'RSS where PSS was not measured: PostgreSQL\'s summed over its '
             'processes counts its shared buffers once per process, an '
             'overestimate') if any(r['memory_mib'] for r in rows) else
         'Memory: not measured (results.json records none; python -m '
         'bench.soak measures an engine\'s).')]
    if page == mixed.PAGE:
        header.append('mix: requests/s counts every request of a visit '
                      '(GET /, then a vote or a page).')
    header += ['Machine: ' + said.replace('`', '')
               for said in floor.lines(results.get('floor'), slo)[1:]]
    header += cluster_lines(results, page, slo, found, names, workers, price,
                            max_cores, headroom, by_name)
    return header, rows


KINDS = (('rediscluster', 'Redis Cluster'), ('redis', 'one Redis'),
         ('tarantool', 'Tarantool'))
SITES = (5000, 20000, 100000)


def server_rate(results, name, page, d, t, workers):
    """Mix requests/s of one server process with its core t busy (on the
    run's curve, else at its capacity point): the rate its votes' batches
    form at."""
    curve = demand.curve(results, name, page)
    app = sizing.app_rate(curve, t, workers) if len(curve) > 1 else None
    return app or d['rate'] / workers


def cluster_lines(results, page, slo, found, names, workers, price, max_cores,
                  headroom, by_name):
    """A Redis Cluster's ceiling (its rankings' shard within its share of
    a core) and its sites at SITES beside one Redis's and Tarantool's, when
    the run has a cluster engine and the workload is the mix; [] else."""
    clusters = [n for n in names if n in found
                and demand.database_of(n) == 'rediscluster']
    if not clusters or page != mixed.PAGE:
        return []
    lines = []
    batches = results.get('cluster_batches')
    for n in clusters:
        d = demand.at_capacity(results, n, page, slo)
        if not d or not d.get('share'):
            continue
        t = headroom * min(1.0, d['share'] / workers)
        if batches:
            curve = sizing.rankings_curve(batches)
            own = server_rate(results, n, page, d, t, workers)
            us, how = sizing.at(curve, own, 'serial_us')
            top = t * 1e6 / us
            source = ("from bench.py cluster-batches (%s): µs per vote at the batch "
                      "one server's votes form at its %s mix requests/s" % (
                          batches.get('measured', 'undated'), sizing.per_s(own)))
        else:
            curve = demand.curve(results, n, page)
            source = ("from the run's own points: the run carries no bench.py "
                      'cluster-batches figures')
            top, how = sizing.own_rate(curve, 'serial_us', t)
        if top:
            lines.append("Redis Cluster ceiling, %s: %s mix requests/s, its rankings' "
                         "shard's main thread at %d %% (%s%s)" % (
                             n, sizing.per_s(top), sizing.pct(t), source,
                             '; past %s/s held: modelled' % sizing.per_s(curve[-1]['rate'])
                             if how == 'beyond' else ''))
    for rate in SITES:
        said = []
        for kind, label in KINDS:
            rows = [row(n, found[n], rate, workers, price, max_cores, by_name.get(n),
                        results, page, slo, headroom)
                    for n in names if n in found and demand.database_of(n) == kind]
            fit = sorted((r for r in rows if r['cores']),
                         key=lambda r: (r['cores'], -r['per_core']))
            if fit:
                said.append('%s %s (%s, %s)' % (label, sizing.plural(fit[0]['cores'], 'core'),
                                                fit[0]['engine'], fit[0]['basis']))
            elif rows:
                near = min(rows, key=lambda r: (r['total'] or 1e9, -r['per_core']))
                said.append('%s none (%s: %s)' % (label, near['engine'], near['limit']))
        lines.append('At %s/s: %s.' % (sizing.per_s(rate), '; '.join(said)))
    return lines


def refusal(rows, rate, page, slo, max_cores):
    """Why no engine serves the rate: the nearest one's reason."""
    said = 'no engine serves %s requests/s of %s within %s on at most %s' % (
        '{:,.0f}'.format(rate), page, budget.label(slo), sizing.plural(max_cores, 'core'))
    sized = [r for r in rows if r.get('sized')]
    if sized:
        best = min(sized, key=lambda r: r['total'])
        return '%s (%s: %s cores; %s)' % (said, best['engine'], best['total'],
                                          best['notes'][0])
    unsized = [r for r in rows if r.get('total')]
    if not unsized:
        return said
    best = min(unsized, key=lambda r: r['total'])
    return '%s (%s would need %d)' % (said, best['engine'], best['total'])


COLUMNS = ['engine', 'capacity/core', 'cores', 'basis', 'database',
           'first limit', 'monthly $', '$/M requests', 'memory', 'notes']
NUMERIC = (1, 2, 6, 7, 8)
# $ per million requests here: whole cores at the rate asked (results.md's
# cost table gives one core at its capacity, the cheapest it gets)
MILLION = '$/M requests at %s/s'


def cells(r):
    """A row's columns as text."""
    money = lambda v, f: '–' if v is None else f % v  # noqa: E731
    return [r['engine'], '{:,.0f}'.format(r['per_core']),
            '–' if r['cores'] is None else str(r['cores']), r['basis'],
            r['database'], r['limit'],
            money(r['monthly'], '%.2f'), money(r['per_million'], '%.4f'),
            'not measured' if r['memory_mib'] is None else
            '{:,.0f} MiB'.format(r['memory_mib']), '; '.join(r['notes'])]


WIDTH = 100     # the text's lines; the table's fit in 120 columns
TABLE = ['stack', 'cores', '$/month', 'first limit', 'basis']


def wrap(line, first='', rest='  '):
    """line in lines of WIDTH, a number kept with its unit."""
    kept = re.sub(r'(\d) (%|MiB|ms|cores?)(?!\w)', '\\1\u00a0\\2', line)
    return [w.replace('\u00a0', ' ') for w in textwrap.wrap(
        kept, WIDTH, initial_indent=first, subsequent_indent=rest,
        break_long_words=False, break_on_hyphens=False)] or ['']


def text(header, rows):
    """The header, a compact table (stack, cores, $/month, first limit,
    basis) and a numbered note per row with the rest of its figures."""
    table = [TABLE] + [[c[0], c[2], c[6], c[5], '%s [%d]' % (c[3], n)]
                       for n, c in enumerate(map(cells, rows), 1)]
    widths = [max(len(line[i]) for line in table) for i in range(len(TABLE))]
    lines = ['  '.join(c.rjust(w) if i in (1, 2) else c.ljust(w)
                       for i, (c, w) in enumerate(zip(line, widths))).rstrip()
             for line in table]
    notes = []
    for n, r in enumerate(rows, 1):
        c = cells(r)
        notes += wrap('%s: capacity/core %s; database %s; %s %s; '
                      'memory %s' % (c[0], c[1], c[4], MILLION % sizing.per_s(r['rate']),
                                     c[7], c[8]),
                      '[%d] ' % n, '    ')
        notes += wrap('Notes: ' + c[9], '    ', '    ')
    out = [w for line in header for w in wrap(line)]
    return '\n'.join(out + [''] + lines + [''] + notes) + '\n'


def number(value, what, most=None):
    """A positive finite number, at most `most`; Refused says why not."""
    try:
        n = float(value)
    except ValueError:
        raise Refused('%s: %r is not a number' % (what, value))
    if not math.isfinite(n):
        raise Refused('%s must be a finite number (got %s)' % (what, value))
    if not n > 0:
        raise Refused('%s must be above zero (got %s)' % (what, value))
    if most is not None and n > most:
        raise Refused('%s must be at most %s (got %s): past that the answer is '
                      'arithmetic, not a site' % (what, '{:,}'.format(most), value))
    return n


def main(argv):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split('\n\n')[0])
    p.add_argument('results', metavar='RESULTS', help='a results folder or its results.json')
    p.add_argument('--rate', required=True, metavar='N', help='requests/s to serve')
    p.add_argument('--slo', metavar='PCT=BUDGET',
                   help="the latency budget (default: the run's own, e.g. "
                        'p99=10ms); another one is read from the fixed-rate points')
    p.add_argument('--workload', metavar='mix|PAGE',
                   help='mix (default when the run has it) or a page the run measured')
    cost = p.add_mutually_exclusive_group()
    cost.add_argument('--price', metavar='DOLLARS',
                      help='$ per core-month of %d h (default %g: %s)'
                           % (HOURS, PRICE * HOURS, SOURCE))
    cost.add_argument('--core-hour-price', metavar='DOLLARS', default=str(PRICE),
                      help='$ per core-hour (default %g)' % PRICE)
    p.add_argument('--max-cores', metavar='N', default=str(MAX_CORES),
                   help='the most cores to consider (default %d)' % MAX_CORES)
    p.add_argument('--headroom', metavar='SHARE', default=str(sizing.HEADROOM),
                   help="each modelled core's busy share, of the share the "
                        "run's core kept the budget at (default %g)" % sizing.HEADROOM)
    p.add_argument('--database', metavar='NAME',
                   help='only engines on this database (tarantool, postgres, '
                        'redis, rediscluster)')
    p.add_argument('--framework', metavar='NAME',
                   help='only engines of this framework (aiohttp, granian, ...)')
    args = p.parse_args(argv)
    try:
        rate = number(args.rate, '--rate', MAX_RATE)
        if rate < 1:
            raise Refused('--rate must be at least 1 request/s (got %s): '
                          'below that every stack is its smallest site'
                          % args.rate)
        price = (number(args.price, '--price') / HOURS if args.price else
                 number(args.core_hour_price, '--core-hour-price'))
        max_cores = int(number(args.max_cores, '--max-cores'))
        if max_cores < 1:
            raise Refused('--max-cores must be at least 1 (got %s)' % args.max_cores)
        headroom = number(args.headroom, '--headroom', 1)
        try:
            slo = budget.parse(args.slo) if args.slo else None
        except ValueError as e:
            raise Refused('--slo: %s' % e)
        try:
            results = load(args.results)
        except (OSError, ValueError) as e:
            raise Refused('cannot read results: %s' % e)
        try:
            header, rows = advise(results, rate, slo, args.workload, price, max_cores,
                                  headroom, args.database, args.framework)
        except (KeyError, TypeError, AttributeError, ValueError,
                OverflowError, ZeroDivisionError) as e:
            raise Refused('not a bench.py results.json (%s)' % e)
    except Refused as e:
        sys.stderr.write('%s: error: %s\n' % (PROG, e))
        return e.code
    sys.stdout.write(text(header, rows))
    return 0


def embedded(results, page=None):
    """What results.html's ranking (bench/ranking.js) computes advise's
    table from, for the workload advise would choose: per engine its
    capacity searches, and per fixed-rate point the rate, whether it served
    what was asked (no errors, the rate achieved, the votes adding up), its
    p99, its demand per tier and the core's busy share."""
    slo = run_slo(results)
    try:
        page = page or workload_of(results, None)
    except Refused:
        page = sorted({p for (_, p) in capacities(results)})[0]
    by_name = {t['name']: t for t in results.get('targets') or []}
    workers = (results.get('settings') or {}).get('workers') or 1
    found = {n: c for (n, p), c in capacities(results).items() if p == page}
    out = []
    for name in engines(results):
        points = []
        for r in results.get('latency') or []:
            if r.get('target') != name or r.get('page') != page:
                continue
            check = r.get('vote_check') or {'ok': True}
            report = r.get('oha')
            points.append({
                'k': '%s|%s' % (r.get('pair'), r.get('run')),
                'o': demand.offered_of(r),
                'ok': bool(check['ok'] and budget.served(report) is None),
                'p': (report or {}).get('latency_ms', {}).get('p99'),
                'l': {f: v for f, v in ((report or {}).get('latency_ms') or {}).items()
                      if f in FIGURES},
                'h': bool((r.get('host') or {}).get('slow')),
                'd': demand.of_point(r), 's': demand.share(r)})
        replicas = []
        for t in results.get('targets') or []:
            tags = [x for x in storage._tags(t['name'])
                    if not x.endswith(('replica', 'replicas'))]
            if storage.replicas_of(t['name']) and \
                    storage.retagged(t['name'], tags) == name:
                replicas.append(t['name'])
        cap = [c['rate'] for c in results.get('capacity') or []
               if c.get('target') == name and c.get('page') == page]
        out.append({'name': name, 'database': demand.database_of(name),
                    'framework': framework_of(name),
                    'said': capacity_notes(found[name]) if name in found else [],
                    'noisy': int(NOISE * 100) if name in found and found[name]['noisy']
                    else 0,
                    'tagged': bool(storage.replicas_of(name)),
                    'replicas': replicas, 'memory': memory_of(by_name.get(name), workers),
                    'cap': cap if name in found else None, 'points': points})
    figures = {f for e in out for p in e['points'] for f in p['l']}
    batches = results.get('cluster_batches')
    return {'page': page, 'slo': slo, 'workers': workers, 'price': PRICE,
            'max_cores': MAX_CORES, 'max_rate': MAX_RATE, 'hours': HOURS,
            'headroom': sizing.HEADROOM, 'noise': int(NOISE * 100),
            'percentiles': [f for f in FIGURES if f in figures],
            'floor': floor.embedded(results.get('floor')),
            'rankings': sizing.rankings_curve(batches)
            if batches and page == mixed.PAGE else None,
            'disk': disk_rate(results), 'engines': out}
