"""server.py for one engine as a child process: started, waited for until
it answers, stopped. The one way the bench, the soak, the crash and flood
commands and the tests start a site."""
import os
import signal
import subprocess
import sys
import time

from runtime.databases.table import TABLE
from runtime.processes import answers, free_port, terminate
from runtime.settings import PORT_ENVIRONMENT, ROOT


# What server.py logs once its start-up objects are frozen (runtime/serve.py).
FROZEN = 'start-up objects frozen'
# server.py's option that starts an engine without the sessions and
# ballots its database holds.
FORGET = '--forget-visitors'
# and the one that keeps its databases' snapshots out of the timed points.
AT_START = '--snapshots-at-start'


def tail(path, lines=15):
    try:
        with open(path, 'rb') as f:
            text = f.read().decode('utf-8', 'replace')
    except OSError:
        return ''
    return '\n'.join(text.splitlines()[-lines:])


def own_ports():
    """server.py's environment for local databases on free ports, apart
    from any other run's."""
    return {name: str(free_port()) for name in PORT_ENVIRONMENT.values()}


def site_environment(env=None, outside=None):
    """server.py's environment: `outside` (default os.environ) without the
    database addresses it may hold (STICKERS_REDIS, ...), plus `env`. An
    engine the bench starts uses a database only when given its address
    in `env`; never one the shell names, which --forget-visitors would
    empty and the verification would vote into."""
    outside = os.environ if outside is None else outside
    addresses = {db.environment for db in TABLE}
    found = {k: v for k, v in outside.items() if k not in addresses}
    found.update(env or {})
    return found


def wait_until(ready, timeout, interval=0.05, message='not ready'):
    """Poll ready() until it is true; TimeoutError(message) after
    `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError(message)
        time.sleep(interval)


class EngineServer:
    """start() returns when the port answers (or ready() is true); the
    managed databases server.py starts are its children and share its CPU
    pinning."""

    def __init__(self, name, port, args, log_path, pin=(), env=None,
                 python=sys.executable, label=None, root=ROOT):
        """env: added to server.py's environment (site_environment: the
        database addresses only from it); python: the interpreter of
        server.py; label: the name in results, if not the engine's;
        root: the checkout whose server.py runs."""
        self.engine = name
        self.name, self.port = label or name, port
        self.env = site_environment(env)
        self.url = 'http://127.0.0.1:%d' % port
        self.log_path = log_path
        self.root = root
        self.argv = list(pin) + [python, os.path.join(root, 'server.py'),
                                 '-e', name, '-p', str(port)] + list(args)
        self.process = None

    def start(self, timeout=300, ready=None, frozen=False):
        """Start it; return once ready() (default: the port answers, and
        with `frozen` the server has frozen its start-up objects, a full
        collection that must not fall in what is measured). RuntimeError
        with the log's tail if it exits or times out."""
        if answers('127.0.0.1', self.port):
            raise RuntimeError('port %d is already in use' % self.port)
        with open(self.log_path, 'ab') as log:
            self.process = subprocess.Popen(
                self.argv, cwd=self.root, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                env=self.env)
        ready = ready or (lambda: answers('127.0.0.1', self.port, 0.2) and (
            not frozen or FROZEN in self.output()))

        def up():
            if self.process.poll() is not None:
                raise RuntimeError('server.py exited with %d:\n%s' % (
                    self.process.returncode, tail(self.log_path)))
            return ready()
        try:
            wait_until(up, timeout, 0.05)
        except TimeoutError:
            self.stop()
            raise RuntimeError('no answer on port %d after %d s:\n%s' % (
                self.port, timeout, tail(self.log_path)))
        return self

    def output(self):
        with open(self.log_path, 'rb') as f:
            return f.read().decode('utf-8', 'replace')

    def alive(self):
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout=30, sig=signal.SIGTERM):
        """Its exit status. SIGTERM lets server.py stop the databases it
        started, too."""
        return terminate(self.process, timeout, sig)
