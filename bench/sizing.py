"""One site per engine for a rate: its cores, the database's layout, its
first limit, memory, from the demand per tier a latency run measured
(bench/latency/demand.py). The arithmetic only: results.html repeats it in
JavaScript (bench/ranking.js), so the two are kept alike.

The run measured each engine with its server process and its database
sharing one core, busy u at the highest rate that kept the budget. A site
is sized the same way, its tiers co-located on its cores, each core at t =
headroom x u (HEADROOM by default: see docs/benchmark.md):
  cores          = ceil(rate x (server + serial + spread [+ replicas]) µs
                   / 1e6 / t), the site rounded, not each tier
  serial thread  = rate x serial µs / 1e6 of one core, which it cannot
                   leave: above t it cannot keep the budget however many
                   cores the site has (Tarantool's transaction thread,
                   Redis's main thread)
  read replicas  = ceil(rate x replicas µs / 1e6 / t) replica processes
                   among those cores, from a --replicas run of the engine,
                   when one primary's serial thread is too busy and that
                   run's primary is not.
A Redis Cluster (cluster()): the rankings' shard's own work (the votes'
applies) is its serial thread, its µs per mix request read at one server
process's rate (each server applies the votes it answered, in batches
that form at its own rate); the cores hold the server, that work, the
catalogue's reads on the rankings' replicas and the buckets' work, with
bucket shards = ceil(rate x shards µs / 1e6 / t) for the layout.
Where the run itself served the rate (advise.row), none of this is used:
the answer is the run's cores, measured.

Each tier's CPU per request is read where the site runs it (figures()),
on the run's curve (the demand at each rate it served): a server
process's at an app core's own rate, its core at t with the database
elsewhere (at most the site's rate); the database's at the site's rate.
Between two rates measured, interpolated in log rate; past the highest,
the highest's figure held (never extrapolated lower), marked modelled.
A run without a curve: its point at capacity, said so. Storage: rate x
bytes written per request against the disk's write rate the run measured
(bench/disk.py); past headroom of it the site is refused."""
import math

HOURS = 730     # a month of hours
HEADROOM = 0.8  # of the busy share that kept the budget
THREAD = {'tarantool': 'transaction thread', 'redis': 'main thread'}
NAMES = {'tarantool': 'Tarantool', 'redis': 'Redis', 'postgres': 'PostgreSQL'}


def pct(share):
    """A share as a whole percentage, half up (as results.html's
    Math.round: the page and advise print the same)."""
    return int(math.floor(share * 100 + 0.5))


def plural(n, what):
    return '%d %s%s' % (n, what, '' if n == 1 else 's')


def per_s(rate):
    """A rate in whole requests/s, half up (the page prints the same)."""
    return '{:,}'.format(int(math.floor(rate + 0.5)))


def cores_for(rate, us, t):
    return int(math.ceil(rate * us / 1e6 / t - 1e-9)) if us else 0


def at(curve, rate, field):
    """(µs of field at rate, how): 'measured' at or between two rates of
    the curve (interpolated in log rate), 'beyond' its highest rate or
    'below' its lowest (that end's figure held); (None, None) when the
    curve has no figure of field."""
    pts = [(p['rate'], p[field]) for p in curve
           if p.get(field) is not None and p.get('rate')]
    if not pts:
        return None, None
    if rate <= pts[0][0]:
        return pts[0][1], 'measured' if rate == pts[0][0] else 'below'
    if rate >= pts[-1][0]:
        return pts[-1][1], 'measured' if rate == pts[-1][0] else 'beyond'
    for (r0, u0), (r1, u1) in zip(pts, pts[1:]):
        if rate <= r1:
            f = (math.log(rate) - math.log(r0)) / (math.log(r1) - math.log(r0))
            return u0 + (u1 - u0) * f, 'measured'


def own_rate(curve, field, t):
    """(rate, how) at which one core doing only field's work is t busy:
    rate x µs(rate) = t x 1e6 with µs on the curve; past its highest rate
    (or below its lowest) at that end's figure, how saying so. (None,
    None) without figures."""
    pts = [(p['rate'], p[field]) for p in curve
           if p.get(field) and p.get('rate')]
    if not pts:
        return None, None
    goal = t * 1e6

    def work(r):
        return r * at(curve, r, field)[0]
    if work(pts[0][0]) >= goal:
        return goal / pts[0][1], 'below'
    for (r0, _), (r1, _) in zip(pts, pts[1:]):
        if work(r1) >= goal:
            lo, hi = math.log(r0), math.log(r1)
            for _ in range(60):
                mid = (lo + hi) / 2
                if work(math.exp(mid)) < goal:
                    lo = mid
                else:
                    hi = mid
            return math.exp(hi), 'measured'
    return goal / pts[-1][1], 'beyond'


def app_rate(curve, t, workers):
    """Requests/s of one server process whose core is t busy, on the curve
    of a run whose `workers` processes shared its rates; None without
    figures."""
    app = own_rate(curve, 'server_us', t * workers)[0]
    return app / workers if app else None


TIERS = ('serial_us', 'spread_us', 'replicas_us', 'shards_us')


def rankings_curve(batches):
    """A Redis Cluster's rankings' shard from bench.py cluster-batches:
    [{'rate' (mix requests/s of one server process), 'serial_us' (its
    primary's µs per mix request), 'batch'}] at each rate votes were cast
    at, paced, by one process: the µs per vote at the mean batch they
    formed, read on the batch sizes measured (interpolated in log size),
    over the mix requests per vote. Each server applies the votes it
    answered, one batch at a time, so its batches form at its own rate,
    not the site's (rankings())."""
    per = batches['per_vote_mix_requests']
    sizes = sorted(({'rate': float(k), 'serial_us': v[0][0]}
                    for k, v in batches['sizes'].items()), key=lambda p: p['rate'])
    out = []
    for votes, (batch, _) in sorted((float(k), v) for k, v in batches['paced'].items()):
        us = at(sizes, max(batch, 1.0), 'serial_us')[0]
        out.append({'rate': votes * per, 'serial_us': us / per, 'batch': batch})
    return out


def figures(d, rate, t):
    """d with each tier's µs where the site runs it and 'read_at': [(tier,
    µs, rate, how)], how as at()'s. The server's at an app core's own rate
    (own_rate at t, at most rate), the database's tiers at rate. d as it
    is, 'read_at' None, when its curve has fewer than two rates."""
    curve = d.get('curve') or []
    if len(curve) < 2:
        return rankings(dict(d, read_at=None), rate)
    out, points = dict(d), []
    # the run's W server processes each ran at a W-th of its rates
    w = d.get('workers') or 1
    app = app_rate(curve, t, w)
    if app:
        core = min(app, rate)
        us, where = at(curve, core * w, 'server_us')
        out['server_us'] = us
        points.append(('server_us', us, core, where))
    for f in TIERS:
        us, where = at(curve, rate, f)
        if us is not None and d.get(f) is not None:
            out[f] = us
            points.append((f, us, rate, where))
    out['read_at'] = points
    return rankings(out, rate, core if app else None)


def rankings(d, rate, own=None):
    """d with its rankings' shard's µs per mix request from d['rankings']
    (rankings_curve), when it has them, as read_at's last entry: read at
    one server process's rate (own: an app core's; else the run's per
    process at capacity, at most rate), where its batches form. The site's
    rate only multiplies it: more servers send more batches, not bigger
    ones."""
    if not d.get('rankings'):
        return d
    if own is None:
        own = min(rate, d['rate'] / (d.get('workers') or 1)) if d.get('rate') \
            else rate
    us, how = at(d['rankings'], own, 'serial_us')
    points = [p for p in d['read_at'] or () if p[0] != 'serial_us']
    return dict(d, serial_us=us, read_at=points + [('rankings', us, own, how)])


def storage(rate, d, disk, headroom):
    """(note, share of the disk) of a site's writes: rate x bytes written
    per request against the disk's write rate (bytes/s, None when not
    measured); refused when past headroom of it (share > headroom)."""
    written = d.get('written_bytes')
    if not written:
        return None, 0.0
    need = rate * written
    said = '%.0f bytes written to storage per request: %.1f MB/s at this rate' % (
        written, need / 1e6)
    if not disk:
        return said + ("; the disk's write rate not measured in this run (the "
                       'wait for each flush is not CPU, not in the model)'), 0.0
    share = need / disk
    if share > headroom:
        return ('storage: %s, %d %% of the disk\'s %.0f MB/s (more than %d %%): '
                'spread the writes over disks' % (said, pct(share), disk / 1e6,
                                                  pct(headroom))), share
    return said + ', %d %% of the disk\'s %.0f MB/s (the wait for each flush ' \
        'is not CPU, not in the model)' % (pct(share), disk / 1e6), share


def thread_us(d, t, serial_us):
    """The serial thread's µs at the rate it reaches t on d's curve (its
    first limit's), else serial_us."""
    top = own_rate(d['curve'], 'serial_us', t)[0] if len(d.get('curve') or []) > 1 \
        and not d.get('rankings') else None
    return t * 1e6 / top if top else serial_us


def limit(t, serial_us, thread, total_us, max_cores):
    """What stops the site first as the rate rises: its serial thread
    reaching t, or --max-cores cores at t."""
    by_cores = max_cores * t * 1e6 / total_us
    if serial_us and t * 1e6 / serial_us <= by_cores:
        return '%s at %s/s' % (thread, per_s(t * 1e6 / serial_us))
    return '%d cores at %s/s' % (max_cores, per_s(by_cores))


def size(rate, d, price, max_cores, replica=None, memory=None,
         headroom=HEADROOM, disk=None):
    """{'app' (server processes), 'database' (label), 'replicas', 'total',
    'cores' (None when it cannot be built or is past max_cores), 'limit'
    (what stops it first), 'monthly', 'memory_kib', 'notes'} of one site.
    d: demand.at_capacity plus 'database' ('tarantool', ...); replica: the
    same of a run of the engine with read replicas, or None; memory:
    {'server_kib' per process, 'database_kib'} or None; disk: the disk's
    write rate (bytes/s) or None."""
    kind = d.get('database')
    t = headroom * d['share']
    d = figures(d, rate, t)
    if replica:
        replica = figures(replica, rate, t)
    if kind == 'rediscluster' and d.get('shards_us') is not None:
        return stored(cluster(rate, d, price, max_cores, memory, t),
                      rate, d, disk, headroom)
    notes = []
    serial_us = d.get('serial_us') or 0.0
    spread_us = d.get('spread_us') or 0.0
    serial_kind = kind in THREAD and d.get('serial_us') is not None
    replicas_us, blocked = 0.0, None
    if serial_kind and rate * serial_us / 1e6 > t:
        on_replicas = replica and rate * (replica.get('serial_us') or 0) / 1e6
        if replica and on_replicas <= t and replica.get('replicas_us'):
            serial_us = replica.get('serial_us') or 0.0
            spread_us = replica.get('spread_us') or 0.0
            replicas_us = replica['replicas_us']
        else:
            blocked = ('one %s primary: its %s would be %s%d %% busy (the '
                       'site keeps each core within %d %%): shard the writes%s' % (
                           NAMES.get(kind, kind), THREAD[kind],
                           'up to ' if d.get('split') == 'estimated' else '',
                           pct(rate * serial_us / 1e6), pct(t), '' if replica
                           else '; read replicas not measured in this run'))
    total_us = d['server_us'] + serial_us + spread_us + replicas_us
    total = max(1, cores_for(rate, total_us, t))
    replicas = max(1, cores_for(rate, replicas_us, t)) if replicas_us else 0
    thread = THREAD[kind] if serial_kind else None
    cores = total
    if blocked:
        notes.append(blocked)
        cores = None
        first = '%s %d %%' % (thread, pct(rate * serial_us / 1e6))
    elif total > max_cores:
        notes.append('needs %d cores, more than --max-cores %d' % (total, max_cores))
        cores = None
        first = 'needs %d cores' % total
    else:
        first = limit(t, thread_us(d, t, serial_us) if serial_kind and not replicas_us
                      else serial_us if serial_kind else 0, thread, total_us, max_cores)
    if kind and not serial_kind and total > 1:
        notes.append('%s over %d cores, measured on one: its WAL writer and the '
                     'row locks of votes on the same stickers are serial points '
                     'this does not measure' % (NAMES.get(kind, kind), total))
    mem = None
    if memory and memory.get('server_kib'):
        mem = total * memory['server_kib'] + (memory.get('database_kib') or 0) * (
            1 + replicas)
    return stored({
        'app': total, 'database': layout(kind, replicas), 'replicas': replicas,
        'total': total, 'cores': cores, 'limit': first,
        'read_at': d['read_at'] if not (replicas_us and replica['read_at'])
        else d['read_at'][:1] + replica['read_at'][1:],
        'monthly': cores * HOURS * price if cores else None,
        'memory_kib': mem, 'notes': notes}, rate, d, disk, headroom)


def stored(site, rate, d, disk, headroom):
    """site with its storage note, refused when its writes pass headroom
    of the disk's rate."""
    note, share = storage(rate, d, disk, headroom)
    if not note:
        return site
    if share > headroom and site['cores']:
        return dict(site, cores=None, monthly=None, notes=[note] + site['notes'],
                    limit='disk writes %d %%' % pct(share))
    return dict(site, notes=site['notes'] + [note])


def layout(kind, replicas):
    if not kind:
        return '–'
    return 'primary + %d replica%s' % (replicas, 's' if replicas > 1 else '') \
        if replicas else '1 primary'


def cluster(rate, d, price, max_cores, memory, t):
    """size() of a Redis Cluster: the rankings' shard (its primary takes
    the votes' applies, its replicas the catalogue's reads) and bucket
    shards, on the site's cores."""
    notes = []
    rankings_us = d.get('serial_us') or 0.0
    reads = d.get('replicas_us')
    readers = max(1, cores_for(rate, reads, t))
    shards = max(1, cores_for(rate, d['shards_us'], t))
    total_us = d['server_us'] + rankings_us + (reads or 0.0) + d['shards_us']
    total = cores = max(1, cores_for(rate, total_us, t))
    rankings = rate * rankings_us / 1e6
    if rankings > t:
        notes.append("the rankings' shard: its main thread would be %d %% "
                     'busy (the site keeps each core within %d %%): a cluster '
                     "spreads the visitors' data and the reads, not the votes' "
                     'applies' % (pct(rankings), pct(t)))
        cores = None
        first = "rankings' shard %d %%" % pct(rankings)
    elif total > max_cores:
        notes.append('needs %d cores, more than --max-cores %d' % (total, max_cores))
        cores = None
        first = 'needs %d cores' % total
    else:
        first = limit(t, rankings_us if d.get('rankings')
                      else thread_us(d, t, rankings_us), "rankings' shard", total_us,
                      max_cores)
    notes.append("a bucket shard's replica (copying its primary's writes): "
                 'not counted, not measured apart' if reads is not None else
                 'a replica per primary: not counted, not measured')
    mem = None
    if memory and memory.get('server_kib'):
        measured = d.get('shards') or 1
        nodes = 1 + readers + 2 * shards
        mem = total * memory['server_kib'] + (memory.get('database_kib') or 0) \
            * nodes / float(2 * measured)
    label = 'rankings + %d replica%s, %d bucket shard%s + a replica each' % (
        readers, 's' if readers > 1 else '', shards, 's' if shards > 1 else '')
    return {'app': total, 'database': label, 'replicas': readers + shards,
            'total': total, 'cores': cores, 'limit': first, 'read_at': d['read_at'],
            'monthly': cores * HOURS * price if cores else None,
            'memory_kib': mem, 'notes': notes}
