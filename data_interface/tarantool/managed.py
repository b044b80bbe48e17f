"""A local Tarantool running app.lua with its data under var/, for when no
address is given and nothing answers at the default one."""
import logging
import os
import shutil
import socket
import subprocess
import time

from processes import terminate

log = logging.getLogger('tarantool')

APP_LUA = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'app.lua')


def answers(host, port, timeout=0.5):
    """True if something accepts TCP connections at host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class ManagedTarantool:
    def __init__(self, directory, host='127.0.0.1', port=3301, env=None):
        self.directory = os.path.abspath(directory)
        self.host, self.port = host, port
        self.env = dict(env or {})
        self.process = None

    @property
    def log_file(self):
        return os.path.join(self.directory, 'tarantool.log')

    def start(self, timeout=30.0):
        binary = shutil.which('tarantool')
        if binary is None:
            raise RuntimeError('tarantool is not installed: run ./run.sh setup '
                               '(or apt-get install tarantool)')
        os.makedirs(self.directory, exist_ok=True)
        env = dict(os.environ, TNT_DIR=self.directory,
                   TNT_LISTEN='%s:%d' % (self.host, self.port),
                   TNT_LOG=self.log_file,
                   TNT_PID_FILE=os.path.join(self.directory, 'tarantool.pid'))
        env.update(self.env)
        try:
            self._log_offset = os.path.getsize(self.log_file)
        except OSError:
            self._log_offset = 0
        log.info('starting Tarantool on %s:%d with data in %s',
                 self.host, self.port, self.directory)
        self.process = subprocess.Popen(
            [binary, APP_LUA], env=env, cwd=self.directory,
            stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not self._ready():
            if self.process.poll() is not None:
                raise RuntimeError('Tarantool exited with %s; see %s'
                                   % (self.process.returncode, self.log_file))
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError('Tarantool did not start in %.0f s; see %s'
                                   % (timeout, self.log_file))
            time.sleep(0.05)

    def _ready(self):
        try:
            with open(self.log_file, 'rb') as f:
                f.seek(self._log_offset)
                return (b'sticker site instance ready' in f.read()
                        and answers(self.host, self.port))
        except OSError:
            return False

    def stop(self, timeout=10.0):
        if self.process is None or self.process.poll() is not None:
            return
        terminate(self.process, timeout)
        log.info('Tarantool stopped')

    def kill(self):
        """Stop abruptly, as a crash would (for tests)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

