"""One site per engine for a rate: app cores, the database's layout and
cores, the busiest tier, memory, from the demand per tier a latency run
measured (bench/latency/demand.py). The arithmetic only: results.html
repeats it in JavaScript (bench/ranking.js), so the two are kept alike.

Every tier is sized at u, the busy share of the run's core at the highest
rate that kept the budget (a server process and its database shared that
core, and kept the budget with it that busy):
  app cores      = ceil(rate x server µs / 1e6 / u)
  serial thread  = rate x serial µs / 1e6 of one core; above u it cannot
                   keep the budget, and no core added elsewhere helps
  spread cores   = ceil(rate x spread µs / 1e6 / u) (at least 1 core for a
                   database with no serial thread; the serial thread has a
                   core of its own)
  read replicas  = ceil(rate x replicas µs / 1e6 / u), from a --replicas run
                   of the engine, when one primary's serial thread is too
                   busy and that run's primary is not.
A Redis Cluster (cluster()): the rankings' shard's own work (the votes'
applies) is its serial thread (within u, or no shard count helps); its
replicas = ceil(rate x replicas µs / 1e6 / u), the catalogue's reads;
bucket shards = ceil(rate x shards µs / 1e6 / u), each with a replica on
a core of its own (that replica's CPU assumed, not measured)."""
import math

HOURS = 730     # a month of hours
THREAD = {'tarantool': 'transaction thread', 'redis': 'main thread'}
NAMES = {'tarantool': 'Tarantool', 'redis': 'Redis', 'postgres': 'PostgreSQL'}


def pct(share):
    """A share as a whole percentage, half up (as results.html's
    Math.round: the page and advise print the same)."""
    return int(math.floor(share * 100 + 0.5))


def cores_for(rate, us, u):
    return int(math.ceil(rate * us / 1e6 / u - 1e-9)) if us else 0


def size(rate, d, price, max_cores, replica=None, memory=None):
    """{'app', 'database' (label), 'db_cores', 'replicas', 'cores' (None
    when it cannot be built or is past max_cores), 'busiest' (tier, share),
    'monthly', 'memory_kib', 'notes'} of one site. d: demand.at_capacity
    plus 'database' ('tarantool', ...); replica: the same of a run of the
    engine with read replicas, or None; memory: {'server_kib' per process,
    'database_kib'} or None."""
    u, kind = d['share'], d.get('database')
    if kind == 'rediscluster' and d.get('shards_us') is not None:
        return cluster(rate, d, price, max_cores, memory)
    notes = []
    app = max(1, cores_for(rate, d['server_us'], u))
    serial = rate * (d.get('serial_us') or 0.0) / 1e6
    spread_us = d.get('spread_us') or 0.0
    serial_kind = kind in THREAD and d.get('serial_us') is not None
    replicas, blocked = 0, None
    if serial_kind and serial > u:
        thread = THREAD[kind]
        on_replicas = replica and rate * (replica.get('serial_us') or 0) / 1e6
        if replica and on_replicas <= u and replica.get('replicas_us'):
            replicas = max(1, cores_for(rate, replica['replicas_us'], u))
            serial = on_replicas
            spread_us = replica.get('spread_us') or 0.0
        else:
            blocked = ('one %s primary: its %s would be %s%d %% busy (the '
                       'run kept the budget with its core %d %% busy): shard '
                       'the writes%s' % (
                           NAMES.get(kind, kind), thread,
                           'up to ' if d.get('split') == 'estimated' else '',
                           pct(serial), pct(u), '' if replica else
                           '; read replicas not measured in this run'))
    if serial_kind:
        spread = cores_for(rate, spread_us, u)
        db_cores = 1 + spread
    else:
        spread = max(1, cores_for(rate, spread_us, u)) if kind else 0
        db_cores = spread
    tiers = [('app', rate * d['server_us'] / 1e6 / app)]
    if serial_kind:
        tiers.append((THREAD[kind], serial))
    if spread:
        tiers.append(('database' if not serial_kind else 'database, other threads',
                      rate * spread_us / 1e6 / spread))
    if replicas:
        tiers.append(('replicas', rate * replica['replicas_us'] / 1e6 / replicas))
    busiest = max(tiers, key=lambda t: t[1])
    total = app + db_cores + replicas
    cores = total
    if blocked:
        notes.append(blocked)
        cores = None
    elif total > max_cores:
        notes.append('needs %d cores, more than --max-cores %d' % (total, max_cores))
        cores = None
    if kind and not serial_kind and db_cores > 1:
        notes.append('%s on %d cores, measured on one: its WAL writer and the '
                     'row locks of votes on the same stickers are serial points '
                     'this does not measure' % (NAMES.get(kind, kind), db_cores))
    mem = None
    if memory and memory.get('server_kib'):
        mem = app * memory['server_kib'] + (memory.get('database_kib') or 0) * (
            1 + replicas)
    label = layout(kind, replicas, db_cores)
    return {'app': app, 'database': label, 'db_cores': db_cores,
            'replicas': replicas, 'total': total, 'cores': cores,
            'busiest': busiest, 'serial': serial if serial_kind else None,
            'monthly': cores * HOURS * price if cores else None,
            'memory_kib': mem, 'notes': notes}


def layout(kind, replicas, db_cores):
    if not kind:
        return '–'
    what = 'primary + %d replica%s' % (replicas, 's' if replicas > 1 else '') \
        if replicas else '1 primary'
    return '%s, %d core%s' % (what, db_cores + replicas,
                              's' if db_cores + replicas > 1 else '')


def cluster(rate, d, price, max_cores, memory):
    """size() of a Redis Cluster: the rankings' shard (its primary takes
    the votes' applies, its replicas the catalogue's reads) and bucket
    shards."""
    u, notes = d['share'], []
    app = max(1, cores_for(rate, d['server_us'], u))
    rankings = rate * (d.get('serial_us') or 0.0) / 1e6
    reads = d.get('replicas_us')
    readers = max(1, cores_for(rate, reads, u))
    shards = max(1, cores_for(rate, d['shards_us'], u))
    db_cores = 1 + readers + 2 * shards
    tiers = [('app', rate * d['server_us'] / 1e6 / app),
             ("rankings' shard", rankings),
             ("rankings' replicas", rate * (reads or 0.0) / 1e6 / readers),
             ('bucket shards', rate * d['shards_us'] / 1e6 / shards)]
    busiest = max(tiers, key=lambda t: t[1])
    total = cores = app + db_cores
    if rankings > u:
        notes.append("the rankings' shard: its main thread would be %d %% "
                     'busy (the run kept the budget with its core %d %% '
                     "busy): a cluster spreads the visitors' data and the "
                     "reads, not the votes' applies" % (pct(rankings), pct(u)))
        cores = None
    elif total > max_cores:
        notes.append('needs %d cores, more than --max-cores %d' % (total, max_cores))
        cores = None
    notes.append("a bucket shard's replica, a core each: assumed, not measured"
                 if reads is not None else
                 'a replica per primary, a core each: assumed, not measured')
    mem = None
    if memory and memory.get('server_kib'):
        measured = d.get('shards') or 1
        mem = app * memory['server_kib'] + (memory.get('database_kib') or 0) \
            * db_cores / float(2 * measured)
    label = 'rankings + %d replica%s, %d bucket shard%s + a replica each, ' \
        '%d cores' % (readers, 's' if readers > 1 else '', shards,
                      's' if shards > 1 else '', db_cores)
    return {'app': app, 'database': label, 'db_cores': db_cores,
            'replicas': readers + shards, 'total': total, 'cores': cores,
            'busiest': busiest, 'serial': rankings,
            'monthly': cores * HOURS * price if cores else None,
            'memory_kib': mem, 'notes': notes}
