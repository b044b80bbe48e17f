"""Child processes the project starts (databases, servers, nginx) and the
ports they listen on."""
import ctypes
import fcntl
import ipaddress
import os
import pwd
import queue
import random
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from concurrent.futures import Future

PR_SET_CHILD_SUBREAPER = 36


def terminate(process, timeout, sig=signal.SIGTERM):
    """SIGTERM (or sig), then SIGKILL after `timeout` seconds; no-op if it
    has exited. Returns the exit code."""
    if process is not None and process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return None if process is None else process.returncode


def free_port(host='127.0.0.1', span=None, fits=None):
    """A TCP port free on host now, outside the range the OS picks clients'
    ports from: a client that connects to a port in that range while
    nothing listens there may be connected to itself, and then holds it.
    Ports up to 100 above it stay outside too (replicas: +10, +20, ...).
    span (low, high): pick from it instead; fits(port): a check in place
    of a bind. When none fits, the OS's pick."""
    low, high = client_ports()
    spans = [(lowest_server_port(low), low - 100), (high + 1, 65436)]
    span = share(span or max(spans, key=lambda span: span[1] - span[0]))
    fits = fits or (lambda port: bindable(host, port))
    for _ in range(200 if span[1] - span[0] >= 1000 else 0):
        port = _pick.randrange(*span)
        if fits(port):
            return port
    with socket.socket() as s:    # no room outside it: the OS's pick
        s.bind((host, 0))
        return s.getsockname()[1]


def lowest_server_port(client_low):
    """The lowest port free_port() picks by default, below the OS's
    clients' lowest."""
    return max(1024, client_low - 12000)


_pick = random.SystemRandom()    # not the seeded module-level generator


def share(span, setting=None):
    """The part of span (low, high) that STICKERS_PORT_SHARE=K/N gives this
    process: the K-th of N, with room for +100 below the next. Processes
    that pick ports at once (the test run's lanes) each take their own."""
    setting = os.environ.get('STICKERS_PORT_SHARE') if setting is None \
        else setting
    if not setting:
        return span
    try:
        k, n = map(int, setting.split('/'))
        if not 1 <= k <= n:
            raise ValueError
    except ValueError:
        raise ValueError('STICKERS_PORT_SHARE=%r: expected K/N, 1 <= K <= N'
                         % setting)
    size = (span[1] - span[0]) // n
    low = span[0] + (k - 1) * size
    return low, low + size - 100


def client_ports():
    """The range (low, high) the OS picks clients' ports from."""
    try:
        with open('/proc/sys/net/ipv4/ip_local_port_range') as f:
            low, high = map(int, f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999     # Linux's default


def bindable(host, port):
    try:
        with socket.socket() as s:
            s.bind((host, port))
        return True
    except OSError:
        return False


def answers(host, port, timeout=0.5):
    """True if something accepts TCP connections at host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def adopt_orphans():
    """Become the parent of our orphaned descendants (Linux): a daemon whose
    launcher exits (PostgreSQL's postmaster, once pg_ctl is done) is then
    ours to reap, not a zombie where PID 1 reaps nothing (containers)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1,
                                                0, 0, 0)
    except (OSError, AttributeError):
        pass


def exit_reason(returncode):
    """'died with signal 9' or 'exited with status N', from a return code
    (negative: the signal)."""
    if returncode < 0:
        return 'died with signal %d' % -returncode
    return 'exited with status %d' % returncode


def describe(status):
    """exit_reason() of a wait status."""
    return exit_reason(-os.WTERMSIG(status) if os.WIFSIGNALED(status)
                       else os.WEXITSTATUS(status))


def reap(pid, timeout=0.0):
    """How our child pid ended, reaping it (waiting up to timeout seconds);
    None if it runs or is not our child."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return describe(status)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.02)


def state(pid):
    """The process state letter (R, S, Z...) of pid, or None if none."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def end_all(pids, sig, timeout):
    """Send `sig` to each of `pids`; True once all have ended, False if
    some still run after `timeout` seconds."""
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while any(state(pid) not in (None, 'Z', 'X') for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def children(pid):
    """The pids of the processes whose parent is pid."""
    found = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % entry) as f:
                fields = f.read().rsplit(')', 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1:2] == [str(pid)]:
            found.append(int(entry))
    return found


def command_line(pid):
    """The arguments of process pid (bytes), or [] if it is gone."""
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            return f.read().split(b'\0')
    except OSError:
        return []


def reap_orphans(name):
    """Reap the exited children called `name` we adopted (the other
    processes of a dead postmaster)."""
    me = os.getpid()
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % entry) as f:
                stat = f.read()
        except OSError:
            continue
        comm, _, rest = stat.partition(' (')[2].rpartition(') ')
        fields = rest.split()
        if comm == name and fields[:1] == ['Z'] and fields[1:2] == [str(me)]:
            reap(int(entry))


LISTEN, ESTABLISHED = '0A', '01'    # TCP states in /proc/net/tcp


def tcp_sockets(pid, port, tcp_state=LISTEN):
    """How many TCP sockets of local port `port` in `tcp_state` process pid
    holds (Linux /proc; 0 if it cannot tell)."""
    return len(tcp_socket_fds(pid, port, tcp_state))


def tcp_table():
    """[(local address, local port, remote port, state, inode)] of every
    IPv4/6 TCP socket of this machine (Linux /proc)."""
    rows = []
    for table in ('/proc/net/tcp', '/proc/net/tcp6'):
        try:
            with open(table) as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            p = line.split()
            try:
                address, port = p[1].split(':')
                rows.append((proc_address(address), int(port, 16),
                             int(p[2].rsplit(':', 1)[1], 16), p[3],
                             int(p[9])))
            except (IndexError, ValueError):
                continue
    return rows


def proc_address(text):
    """An address as /proc/net/tcp(6) writes it (32-bit words in host
    order); an IPv4-mapped one as its IPv4 address."""
    address = ipaddress.ip_address(b''.join(
        struct.pack('=I', int(text[i:i + 8], 16))
        for i in range(0, len(text), 8)))
    return getattr(address, 'ipv4_mapped', None) or address


def socket_fds(pid):
    """[(descriptor, socket inode)] of process pid's sockets."""
    found = []
    try:
        fds = os.listdir('/proc/%d/fd' % pid)
    except OSError:
        return found
    for fd in fds:
        try:
            target = os.readlink('/proc/%d/fd/%s' % (pid, fd))
        except OSError:
            continue
        if target.startswith('socket:['):
            found.append((int(fd), int(target[8:-1])))
    return found


def tcp_socket_fds(pid, port, tcp_state=LISTEN):
    """The descriptors of those sockets in process pid."""
    inodes = {inode for _, local, _, state, inode in tcp_table()
              if state == tcp_state and local == port}
    return [fd for fd, inode in socket_fds(pid) if inode in inodes]


def listening(port, host=None):
    """The inodes of the TCP sockets listening on local port `port` that a
    connection to host:port may reach: those bound to that very address if
    there are any (the kernel prefers them), else those bound to the
    wildcard address (0.0.0.0 for IPv4, or :: for either: its IPV6_V6ONLY
    cannot be seen here). One on another address ([::1] when 127.0.0.1 is
    dialled) is not counted. Every one of the port if host is None or a
    name."""
    found = [(address, inode) for address, local, _, state, inode
             in tcp_table() if local == port and state == LISTEN]
    try:
        dialled = ipaddress.ip_address(host)
    except ValueError:
        return {inode for _, inode in found}
    dialled = getattr(dialled, 'ipv4_mapped', None) or dialled
    return ({i for a, i in found if a == dialled}
            or {i for a, i in found if a.is_unspecified
                and (a.version == 6 or dialled.version == 4)})


def holds(pid, port, host=None):
    """True if process pid holds every socket listening on local port
    `port` that a connection to host:port may reach (listening()), and
    there is one: whoever connects there reaches pid."""
    inodes = listening(port, host)
    return bool(inodes) and inodes <= {i for _, i in socket_fds(pid)}


def listener(port, host=None):
    """The process listening on a local TCP port for host (listening();
    the root one when several share the socket), or None (none, or one
    this user cannot see)."""
    inodes = listening(port, host)
    owners = [int(p) for p in os.listdir('/proc') if p.isdigit()
              and inodes & {i for _, i in socket_fds(int(p))}]
    roots = [p for p in owners if parent(p) not in owners]
    return (roots or owners or [None])[0]


def parent(pid):
    """The parent pid of pid, or None if it is gone."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            return int(f.read().rsplit(')', 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def command_name(pid):
    """The command name of pid ('?' if it is gone)."""
    try:
        with open('/proc/%d/comm' % pid) as f:
            return f.read().strip()
    except OSError:
        return '?'


# Databases are started from pool threads; a child's parent-death signal
# fires when the *thread* that forked it ends. So they are all forked by
# one thread that lives as long as the process.
_spawner = {}
_spawner_lock = threading.Lock()


def _spawn_forever(jobs):
    while True:
        future, argv, kwargs = jobs.get()
        try:
            future.set_result(subprocess.Popen(argv, **kwargs))
        except BaseException as e:
            future.set_exception(e)


def spawn(argv, **kwargs):
    """subprocess.Popen(argv, **kwargs), forked by this process's spawner
    thread (see above)."""
    with _spawner_lock:
        jobs = _spawner.get(os.getpid())   # a forked copy needs its own
        if jobs is None:
            jobs = _spawner[os.getpid()] = queue.Queue()
            threading.Thread(target=_spawn_forever, args=(jobs,),
                             name='spawner', daemon=True).start()
    future = Future()
    jobs.put((future, argv, kwargs))
    return future.result()


def launcher(pdeathsig=None, user=None, log=None):
    """The command prefix that runs a program with umask 077, as `user`
    (when root), sent signal `pdeathsig` ('TERM', 'INT') when the thread
    that spawned it ends (Linux, setpriv of util-linux; spawn() it), its
    output appended to `log` (opened as that user) if given."""
    prefix = []
    setpriv = shutil.which('setpriv')
    if setpriv and (pdeathsig or user):
        prefix = [setpriv] + (['--pdeathsig', pdeathsig] if pdeathsig else [])
        if user:
            prefix += ['--reuid', user,
                       '--regid', str(pwd.getpwnam(user).pw_gid),
                       '--init-groups']
        prefix.append('--')
    elif user:
        prefix = ['runuser', '-u', user, '--']
    if log is None:
        return prefix + ['sh', '-c', 'umask 077 && exec "$@"', 'sh']
    return prefix + ['sh', '-c', 'umask 077 && exec "$@" >>"$0" 2>&1', log]


class Adopted:
    """A process this one did not start (a database found running),
    watched and stopped like a subprocess.Popen."""

    def __init__(self, pid):
        self.pid = pid
        self.returncode = None

    def poll(self):
        if self.returncode is None and state(self.pid) in (None, 'Z', 'X'):
            reap(self.pid)     # ours if it was handed to us as a subreaper
            self.returncode = 0
        return self.returncode

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout)
            time.sleep(0.02)
        return self.returncode

    def send_signal(self, sig):
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self):
        self.send_signal(signal.SIGKILL)


def ended(process):
    """How a process that has ended ended ('is gone' for an Adopted one)."""
    if isinstance(process, Adopted):
        return 'is gone'
    return exit_reason(process.returncode)


def lock(path):
    """An exclusive lock on the file at path (made 0600, not through a
    symbolic link) for as long as this process lives or until unlock():
    its descriptor, or None if another process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.write(fd, b'%d\n' % os.getpid())    # for whoever looks
    return fd


def unlock(fd):
    if fd is not None:
        os.close(fd)
