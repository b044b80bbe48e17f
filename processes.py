"""Child processes the project starts (databases, servers, nginx) and the
ports they listen on."""
import ctypes
import os
import signal
import socket
import subprocess
import time

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


def free_port(host='127.0.0.1'):
    """A TCP port free on host now (the OS's pick)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


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


def describe(status):
    """'died with signal 9' or 'exited with status N', from a wait status."""
    if os.WIFSIGNALED(status):
        return 'died with signal %d' % os.WTERMSIG(status)
    return 'exited with status %d' % os.WEXITSTATUS(status)


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


def tcp_socket_fds(pid, port, tcp_state=LISTEN):
    """The descriptors of those sockets in process pid."""
    inodes = set()
    for table in ('/proc/net/tcp', '/proc/net/tcp6'):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if (fields[3] == tcp_state
                            and int(fields[1].rsplit(':', 1)[1], 16) == port):
                        inodes.add('socket:[%s]' % fields[9])
        except (OSError, IndexError, ValueError, StopIteration):
            continue
    found = []
    try:
        fds = os.listdir('/proc/%d/fd' % pid)
    except OSError:
        return found
    for fd in fds:
        try:
            if os.readlink('/proc/%d/fd/%s' % (pid, fd)) in inodes:
                found.append(int(fd))
        except OSError:
            pass
    return found
