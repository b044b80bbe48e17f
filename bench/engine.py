"""server.py for one engine as a child process, pinned like the runner says."""
import os
import subprocess
import sys
import time

from runtime.processes import answers, terminate
from runtime.settings import ROOT


def tail(path, lines=15):
    try:
        with open(path, 'rb') as f:
            text = f.read().decode('utf-8', 'replace')
    except OSError:
        return ''
    return '\n'.join(text.splitlines()[-lines:])


class EngineServer:
    """start() returns when the port answers; the managed databases server.py
    starts are its children and share its CPU pinning."""

    def __init__(self, name, port, args, log_path, pin=(), env=None,
                 python=sys.executable, label=None):
        """env: added to server.py's environment; python: the interpreter
        of server.py; label: the name in results, if not the engine's."""
        self.name, self.port = label or name, port
        self.env = dict(os.environ, **(env or {}))
        self.url = 'http://127.0.0.1:%d' % port
        self.log_path = log_path
        self.argv = list(pin) + [python, os.path.join(ROOT, 'server.py'),
                                 '-e', name, '-p', str(port)] + list(args)
        self.process = None

    def start(self, timeout=300):
        if answers('127.0.0.1', self.port):
            raise RuntimeError('port %d is already in use' % self.port)
        with open(self.log_path, 'ab') as log:
            self.process = subprocess.Popen(
                self.argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
                env=self.env)
        deadline = time.monotonic() + timeout
        while not answers('127.0.0.1', self.port):
            if self.process.poll() is not None:
                raise RuntimeError('server.py exited with %d:\n%s' % (
                    self.process.returncode, tail(self.log_path)))
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError('no answer on port %d after %d s:\n%s' % (
                    self.port, timeout, tail(self.log_path)))
            time.sleep(0.1)

    def alive(self):
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout=30):
        # SIGTERM lets server.py stop the database it started, too.
        terminate(self.process, timeout)
