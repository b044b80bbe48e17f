"""Where a request's CPU time goes: py-spy samples of the server, split by
layer, scaled to the CPU time /proc says the server and its database used."""
import os
import re
import shutil
import subprocess
import sys
import threading
import time

from runtime import frameworks
from runtime.databases import table
from runtime.processes import (ESTABLISHED, children, command_name, listener,
                               socket_fds, tcp_table)
from runtime.settings import ROOT

RATE = 200                      # py-spy samples per second
HZ = os.sysconf('SC_CLK_TCK')
FRAMEWORK_MODULES = {m for f in frameworks.TABLE for m in f.modules}
# Module path (under site-packages or the checkout) -> layer. A stack counts
# for the layer of its innermost frame listed here; other modules (the
# standard library, asyncio included) count for their caller, and a stack
# with no listed frame at all is the event loop itself: 'framework'.
LAYERS = (
    ('pages/render.py', 'templates'), ('pages/', 'pages'),
    ('templates/', 'templates'), ('jinja2/', 'templates'),
    ('markupsafe/', 'templates'),
    ('data_interface/', 'driver'), ('tarantool/', 'driver'),
    ('msgpack/', 'driver'), ('psycopg_binary/', 'driver'),
    ('hiredis/', 'driver'),
) + tuple((module + '/', 'driver') for driver in table.DRIVERS
          for module in driver.modules if module not in FRAMEWORK_MODULES
          ) + (
    # The Django ORM's driver: Django's db package (the rest of Django is
    # the framework's).
    ('django/db/', 'driver'),
) + (
    ('uvloop/', 'framework'), ('server.py', 'framework'),
) + tuple((path + '/', 'framework') for f in frameworks.TABLE
          for path in (f.folder,) + f.modules + f.parts)
PYTHON_LAYERS = ('framework', 'pages', 'templates', 'driver')
# Every layer of the report, in the order of its columns and bars.
ALL_LAYERS = PYTHON_LAYERS + ('kernel', 'database')
FRAME = re.compile(r'^.* \((.+?)(?::\d+)?\)$')


def py_spy():
    """py-spy next to this interpreter, else on PATH, else None."""
    here = os.path.join(os.path.dirname(sys.executable), 'py-spy')
    return here if os.access(here, os.X_OK) else shutil.which('py-spy')


def module_path(filename):
    """Where a frame's file lives, relative to site-packages or the checkout;
    None for the standard library and the like."""
    if '/site-packages/' in filename:
        return filename.split('/site-packages/', 1)[1]
    if filename.startswith(ROOT + os.sep):
        return filename[len(ROOT) + 1:]
    return None


def layer_of(filename):
    path = module_path(filename)
    if path is None:
        return None
    for prefix, layer in LAYERS:
        if path.startswith(prefix):
            return layer
    return None


def classify(frames):
    """The layer of one stack, outermost frame first."""
    for frame in reversed(frames):
        m = FRAME.match(frame)
        layer = m and layer_of(m.group(1))
        if layer:
            return layer
    return 'framework'


def fold(text):
    """{layer: samples} of py-spy's raw output (folded stacks)."""
    counts = dict.fromkeys(PYTHON_LAYERS, 0)
    for line in text.splitlines():
        stack, _, count = line.rpartition(' ')
        if stack and count.isdigit():
            counts[classify(stack.split(';'))] += int(count)
    return counts


# --- CPU time from /proc ----------------------------------------------------

def stat(pid):
    """(ppid, utime, stime, cutime, cstime) in seconds, or None if gone."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            fields = f.read().rpartition(')')[2].split()
    except (OSError, ValueError):
        return None
    ticks = [int(x) / HZ for x in fields[11:15]]
    return (int(fields[1]),) + tuple(ticks)


def pids():
    return [int(p) for p in os.listdir('/proc') if p.isdigit()]


def database_cpu(pid):
    """{pid: CPU seconds} of a database server: the process (every thread)
    and its children (PostgreSQL's backends); children that exited are in the
    parent's cutime + cstime."""
    s = stat(pid)
    if s is None:
        return {}
    cpu = {pid: sum(s[1:])}
    for child in children(pid):
        c = stat(child)
        if c:
            cpu[child] = c[1] + c[2]
    return cpu


def cpu_delta(before, after):
    return sum(max(0.0, v - before.get(k, 0.0)) for k, v in after.items())


# The database's one thread that runs every request in turn: Tarantool's
# transaction (tx) thread and Redis's command loop are each the process's
# main thread; PostgreSQL has none (a backend per connection).
SERIAL = {'tarantool': "Tarantool's transaction (tx) thread",
          'redis-server': "Redis's main (command) thread"}


def thread_cpu(pid, tid):
    """CPU seconds of one thread of pid, or 0.0 if it is gone."""
    try:
        with open('/proc/%d/task/%d/stat' % (pid, tid)) as f:
            fields = f.read().rpartition(')')[2].split()
        return (int(fields[11]) + int(fields[12])) / HZ
    except (OSError, ValueError, IndexError):
        return 0.0


def written_bytes(pid):
    """Bytes pid caused to be sent to storage (/proc/PID/io write_bytes),
    0 when unreadable."""
    try:
        with open('/proc/%d/io' % pid) as f:
            for line in f:
                if line.startswith('write_bytes:'):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def database_demand(pid):
    """What a database server has used so far: CPU seconds of its serial
    thread (SERIAL; 0 for PostgreSQL), of everything else (other threads,
    PostgreSQL's processes), and bytes its processes sent to storage (the
    log or AOF; PostgreSQL's data pages too, when its background writer or
    checkpointer flushes them)."""
    cpu = database_cpu(pid)
    if not cpu:
        return {'serial': 0.0, 'spread': 0.0, 'written': 0}
    serial = thread_cpu(pid, pid) if command_name(pid) in SERIAL else 0.0
    return {'serial': serial, 'spread': max(0.0, sum(cpu.values()) - serial),
            'written': sum(written_bytes(p) for p in cpu)}


def demand_delta(before, after):
    """after - before of database_demand's figures, key by key (a dict of
    figures, such as the nodes', by its keys)."""
    return {k: demand_delta(before.get(k) or {}, v) if isinstance(v, dict)
            else max(0, v - before.get(k, 0)) for k, v in after.items()}


# --- which process is the database ------------------------------------------

def _socket_inodes(pid):
    return {inode for _, inode in socket_fds(pid)}


def _inodes_while(pid, work):
    """(work(), every socket inode pid held while it ran). Reading the TCP
    table takes long on a busy machine, longer than a connection made per
    request lives: its sockets are watched the whole time."""
    seen, done = _socket_inodes(pid), threading.Event()

    def watch():
        while not done.is_set():
            seen.update(_socket_inodes(pid))
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        return work(), seen
    finally:
        done.set()
        watcher.join()


def database_ports(server_pid, listen_port):
    """Ports the server has connections out to (its database)."""
    table, mine = _inodes_while(server_pid, tcp_table)
    return {remote for _, local, remote, state, inode in table
            if inode in mine and state == ESTABLISHED and local != listen_port}


def find_database(server_pid, listen_port, load=None, timeout=10.0):
    """[(pid, name)] of the database servers the engine talks to (its
    primary first, then its read replicas, by port), or None. An engine
    that connects per request has no connection when idle: `load` (a
    callable returning a process) makes some while we look."""
    process = None
    deadline = time.monotonic() + timeout
    try:
        while True:
            found = []
            for port in sorted(database_ports(server_pid, listen_port)):
                pid = listener(port)
                if pid is not None and pid not in [f[0] for f in found]:
                    found.append((pid, command_name(pid)))
            if found:
                return found
            if time.monotonic() > deadline:
                return None
            if process is None and load is not None:
                process = load()
            time.sleep(0.02)
    finally:
        if process is not None:
            process.kill()
            process.wait()


# --- one profiled run --------------------------------------------------------

def sampler(pid, seconds, out, pin=()):
    """py-spy recording `pid` for `seconds`, folded stacks to `out`."""
    argv = list(pin) + [py_spy(), 'record', '-p', str(pid), '-d', str(seconds),
                        '-r', str(RATE), '-f', 'raw', '-o', out,
                        '--nonblocking', '--full-filenames', '--gil']
    log = open(out + '.log', 'wb')
    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT)
    finally:
        log.close()


def split(samples, utime, stime, database, requests):
    """µs per request per layer: the Python layers share the server's user
    time by their samples; kernel is its system time; database its CPU."""
    total = sum(samples.values())
    per = 1e6 / requests if requests else None
    if per is None:
        return None
    us = {layer: (utime * samples[layer] / total * per if total else None)
          for layer in PYTHON_LAYERS}
    us['kernel'] = stime * per
    us['database'] = None if database is None else database * per
    us['server'] = (utime + stime) * per
    return us
