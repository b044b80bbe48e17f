"""A local database that is one child process and says in its log when it
is ready (Tarantool, Redis): starting it and waiting, watching it, stopping
it. A subclass sets name, ready_mark, log_file, host and port, and gives
_launch() (spawn it, return the process) and maybe _why() (what its log
says of a failed start)."""
import logging
import os
import time

from ..processes import Adopted, answers, ended, holds, terminate
from .local import LocalDatabase


class LoggedDatabase(LocalDatabase):
    ready_mark = None     # bytes its log writes once it is ready
    start_timeout = 30.0  # seconds with nothing new in its log

    def __init__(self, directory):
        super().__init__(directory)
        self.process = None
        self.log = logging.getLogger(self.name.lower())

    @property
    def pid_path(self):
        return os.path.join(self.directory, self.pid_file)

    def _take(self, pid):
        self.process = Adopted(pid)

    def _why(self):
        """': why' its log gives for a failed start, or ''."""
        return ''

    def _start(self):
        timeout = self.start_timeout
        self._log_offset = self._log_size()
        self.process = self._launch()
        # The timeout runs from the last line of its log: a long recovery
        # logs what it replays.
        deadline = time.monotonic() + timeout
        logged = self._log_offset
        while not self._ready():
            if self.process.poll() is not None:
                raise RuntimeError('%s %s%s; see %s' % (
                    self.name, ended(self.process), self._why(),
                    self.log_file))
            size = self._log_size()
            if size != logged:
                logged, deadline = size, time.monotonic() + timeout
            if self._stopping or time.monotonic() > deadline:
                terminate(self.process, 10)
                if self._stopping:
                    self.log.info('%s stopped while starting', self.name)
                    raise RuntimeError('%s: stopped while starting'
                                       % self.name)
                raise RuntimeError('%s did not start: nothing new in its log '
                                   'for %.0f s; see %s'
                                   % (self.name, timeout, self.log_file))
            time.sleep(0.05)

    def _log_size(self):
        try:
            return os.path.getsize(self.log_file)
        except OSError:
            return 0

    def _since_start(self):
        """What its log says since this start (bytes), or None."""
        try:
            with open(self.log_file, 'rb') as f:
                f.seek(self._log_offset)
                return f.read()
        except OSError:
            return None

    def _ready(self):
        said = self._since_start()
        return (bool(said) and self.ready_mark in said
                and answers(self.host, self.port)
                and holds(self.process.pid, self.port, self.host))

    @property
    def pid(self):
        return self.process and self.process.pid

    def death(self):
        """None while it runs, else how it ended (the process is reaped)."""
        if self.process is None or self.process.poll() is None:
            return None
        return ended(self.process)

    def stop(self, timeout=10.0):
        self._stopping = True
        with self._lock:
            try:
                if self.process is None or self.process.poll() is not None:
                    return
                terminate(self.process, timeout)
                self.log.info('%s stopped', self.name)
            finally:
                self._unmanage()

    def kill(self):
        """Stop abruptly, as a crash would (for tests)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
