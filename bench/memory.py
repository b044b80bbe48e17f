"""Start time and memory of a server the bench runs: seconds from exec to
its first good answer, the RSS of its process tree and of its local
database at rest and after each page's timed runs, and what an idle
keep-alive connection costs it. All RSS in KiB, from /proc."""
import os
import resource
import time
import urllib.error
import urllib.request

from redis.exceptions import RedisError

from runtime import settings
from runtime.databases import table
from runtime.processes import free_port
from . import keepalive
from .engine import FORGET, EngineServer

IDLE = 1000             # idle keep-alive connections opened
READY_PATH = {'engine': '/good', 'hello': '/ugly', 'nginx': '/ugly'}


def status_kib(pid, name):
    """Field `name` ('VmRSS', 'RssAnon', ...) of process pid's status in
    KiB, or None if it is gone (a zombie has none: 0)."""
    try:
        with open('/proc/%d/status' % pid) as f:
            for line in f:
                if line.startswith(name + ':'):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return 0


def rss_kib(pid):
    return status_kib(pid, 'VmRSS')


def parents():
    """{pid: parent pid} of every process, read once."""
    found = {}
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            try:
                with open('/proc/%s/stat' % entry) as f:
                    found[int(entry)] = int(f.read().rsplit(')', 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return found


def tree(pid, leave_out=()):
    """pid and its descendants, without the subtrees of `leave_out`."""
    kids = {}
    for child, parent in parents().items():
        kids.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        if p not in leave_out:
            found.append(p)
            todo += kids.get(p, [])
    return found


def tree_rss_kib(pid, leave_out=()):
    """The sum of the RSS of pid and its descendants (the subtrees of
    `leave_out` left out), in KiB; None if pid is gone."""
    if rss_kib(pid) is None:
        return None
    return sum(rss_kib(p) or 0 for p in tree(pid, leave_out))


def pss_kib(pid):
    """The PSS of pid in KiB (/proc/PID/smaps_rollup: each shared page
    counted once over the processes sharing it), None if unreadable."""
    try:
        with open('/proc/%d/smaps_rollup' % pid) as f:
            for line in f:
                if line.startswith('Pss:'):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def tree_pss_kib(pid, leave_out=()):
    """The PSS of pid and its descendants summed: PostgreSQL's shared
    buffers once, not once per backend as summed RSS has them."""
    if pss_kib(pid) is None:
        return None
    return sum(pss_kib(p) or 0 for p in tree(pid, leave_out))


def answered(url):
    """True once url answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            r.read()
            return r.status == 200
    except (OSError, urllib.error.HTTPError, ValueError):
        return False


def managed_databases(engine, server, storage=None, replicas=0):
    """The local databases an engine's server.py uses (the primary, then
    its replicas; a cluster's nodes); None when the database is given by
    address (not ours to read)."""
    db = table.of(engine)
    if server.env.get(db.environment) or '--' + db.name in server.argv:
        return None
    s = settings.replace(settings.from_environment(environ=server.env),
                         root=server.root)
    if storage:
        s = settings.replace(s, tarantool_engine=storage)
    primary = db.managed(db.directory(s), settings=s)
    found = list(getattr(primary, 'nodes', None) or [primary])  # a cluster's
    return found + [db.managed_replica(primary, index, s)
                    for index in range(1, replicas + 1)]


def database_pids(engine, server, storage=None, replicas=0):
    """The pids of managed_databases, from their pid files, or None."""
    found = managed_databases(engine, server, storage, replicas)
    if found is None:
        return None
    return [pid for pid in (m.ours() for m in found) if pid is not None]


def cluster_nodes(engine, server):
    """{'ROLE PORT': pid} of the local Redis Cluster an engine's server.py
    uses (ManagedCluster.roles), or None: not a cluster, given by address,
    or not answering."""
    db = table.of(engine)
    if db.name != 'rediscluster' or server.env.get(db.environment) \
            or '--' + db.name in server.argv:
        return None
    s = settings.replace(settings.from_environment(environ=server.env),
                         root=server.root)
    cluster = db.managed(db.directory(s), settings=s)
    try:
        roles = cluster.roles()
    except (OSError, RedisError):
        return None
    pids = {n.port: n.ours() for n in cluster.nodes}
    return {'%s %d' % (role, port): pids[port] for port, role in roles.items()
            if pids.get(port) is not None}


def database_rss_kib(pids):
    """The RSS of the databases' process trees (PostgreSQL's backends too),
    or None if there are none."""
    if not pids:
        return None
    return sum(tree_rss_kib(pid) or 0 for pid in pids)


def database_pss_kib(pids):
    """The PSS of the databases' process trees, or None."""
    if not pids:
        return None
    return sum(tree_pss_kib(pid) or 0 for pid in pids)


class Watch:
    """One server's figures, in the `memory` dict of its target record."""

    def __init__(self, record, pid, databases=None):
        self.pid, self.databases = pid, databases or []
        self.m = record['memory'] = {
            'server_rest_kib': None, 'server_peak_kib': None,
            'database_rest_kib': None, 'database_peak_kib': None,
            'server_peak_pss_kib': None, 'database_peak_pss_kib': None,
            'database_pids': databases, 'idle_connections': 0,
            'idle_connections_kib': None, 'per_connection_kib': None}

    def server(self):
        return tree_rss_kib(self.pid, self.databases)

    def at_rest(self, port, connections=IDLE):
        """The RSS at rest, then what `connections` idle keep-alive
        connections (one request each) add to the server's tree."""
        self.m['server_rest_kib'] = self.server()
        self.m['database_rest_kib'] = database_rss_kib(self.databases)
        before = self.m['server_rest_kib']
        held = idle_connections(port, connections)
        try:
            time.sleep(0.3)     # what was read is handled
            after = self.server()
        finally:
            for s in held:
                s.close()
        time.sleep(0.3)         # the closes reach the server before any load
        if held and before is not None and after is not None:
            self.m['idle_connections'] = len(held)
            self.m['idle_connections_kib'] = after - before
            self.m['per_connection_kib'] = round((after - before) / len(held), 2)

    def after_runs(self):
        """Keep the highest RSS seen at the end of a page's timed runs."""
        for key, now in (('server_peak_kib', self.server()),
                         ('database_peak_kib',
                          database_rss_kib(self.databases)),
                         ('server_peak_pss_kib',
                          tree_pss_kib(self.pid, self.databases)),
                         ('database_peak_pss_kib',
                          database_pss_kib(self.databases))):
            if now is not None:
                self.m[key] = max(self.m[key] or 0, now)


def idle_connections(port, n):
    """n sockets to 127.0.0.1:port, each with one GET /ugly answered and
    kept alive (fewer if the server closes some, or our open-files limit
    is lower)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < n + 256:
        want = n + 256 if hard == resource.RLIM_INFINITY else min(n + 256, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        n = min(n, want - 256)
    held, refused = [], 0
    while len(held) < n and refused < max(n // 10, 1):
        c = None
        try:
            c = keepalive.Connection(port, timeout=5)
            status, headers, _ = c.get('/ugly')
        except (OSError, keepalive.Closed, ValueError):
            status, headers = None, {}
        if status == 200 and headers.get('connection') != 'close':
            held.append(c)
        else:
            refused += 1
            if c is not None:
                c.close()
    return held


def timed_start(start, url):
    """Seconds from start() (which execs the server and waits for
    url to answer 200) to that answer."""
    began = time.monotonic()
    start(ready=lambda: answered(url))
    return round(time.monotonic() - began, 3)


def second_start(engine, server, log_path, timeout=120):
    """Seconds from exec of another server.py of the engine (same
    interpreter, options and environment, another port) to its first 200
    on /good, with the databases the first one uses already up and
    loaded; it is stopped at once. None if it did not start."""
    port = free_port()
    other = EngineServer(engine.name, port, [], log_path, env=server.env,
                         label=server.name, root=server.root)
    # The first one's command with the port changed, keeping the visitors.
    argv = [a for a in server.argv if a != FORGET]
    argv[argv.index('-p') + 1] = str(port)
    other.argv, other.env = argv, server.env
    try:
        return timed_start(lambda ready: other.start(timeout, ready),
                           other.url + READY_PATH['engine'])
    except RuntimeError:
        return None
    finally:
        other.stop()


def line(name, start_s, m):
    """One progress line of a target's figures."""
    def mib(kib):
        return '–' if kib is None else '%.1f MiB' % (kib / 1024)
    parts = ['start %s' % ('–' if start_s is None else '%.2f s' % start_s),
             'RSS %s at rest, %s after load' % (mib(m['server_rest_kib']),
                                                mib(m['server_peak_kib'])),
             '%s KiB per idle connection' % ('–' if m['per_connection_kib'] is None
                                             else '%.1f' % m['per_connection_kib'])]
    if m['database_pids']:
        parts.append('database %s at rest, %s after load' % (
            mib(m['database_rest_kib']), mib(m['database_peak_kib'])))
    return '%s: %s' % (name, ', '.join(parts))


def mib(kib):
    return '–' if kib is None else '%.1f' % (kib / 1024)


def section(results):
    """The report's table of start times and memory, or []."""
    rows = []
    for t in results['targets']:
        if t['kind'] == 'remote' and t['status'] == 'ok':
            rows.append([t['name']] + ['not measured (--target)'] + ['–'] * 5)
        m = t.get('memory')
        if not m:
            continue
        per = m['per_connection_kib']
        rows.append([t['name'],
                     '–' if t.get('start_s') is None else '%.2f' % t['start_s'],
                     mib(m['server_rest_kib']), mib(m['server_peak_kib']),
                     '–' if per is None else '%.1f' % per,
                     mib(m['database_rest_kib']), mib(m['database_peak_kib'])])
    if not rows:
        return []
    from .tables import table_md
    return ['', '## Start and memory', '',
            'Start: seconds from exec to the first 200 (an engine: a second '
            'server.py, its databases already up and loaded). RSS of the '
            'server\'s process tree (its workers; not its databases) and of '
            'its local database\'s, at rest and the highest seen at the end '
            'of a page\'s timed runs; what one idle keep-alive connection '
            'adds to the server (of %d opened). – : none, or given by '
            'address.' % IDLE, ''] + table_md(
        ['target', 'start s', 'server MiB at rest', 'after load',
         'KiB per idle connection', 'database MiB at rest', 'after load'],
        rows)
