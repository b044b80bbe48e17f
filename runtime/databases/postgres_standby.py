"""A hot standby of the local cluster (ManagedPostgres), for reads: rebuilt
from the primary at every start (pg_basebackup streams a copy and writes
primary_conninfo), then kept up to date by streaming replication. No
replication slot holds the primary's WAL for it; a rebuild at each start
is what keeps it consistent, and a standby that fell further behind than
the WAL the primary keeps (wal_keep_size) is rebuilt too: its walreceiver
says the WAL is gone, death() reports it, and the watcher restarts it.
A slot was the other way: the primary would keep WAL for a standby however
long it is down (its disk the limit), and one capped by
max_slot_wal_keep_size leaves a standby past the cap just as stuck, so a
rebuild is needed either way; here it costs a second or two.

Its server files are in settings.var/postgres-replica-N, its copy of the
cluster in that directory's cluster/ (postgres_layout), kept as privately
as the primary's. It has no passwords of its own: roles replicate, so the
DSNs are the primary's at the standby's port. primary_conninfo, with the
superuser's password, is in data/postgresql.auto.conf (mode 0600, owned by
the cluster's account).
"""
import logging
import os
import shutil
import signal
import subprocess
import time

from ..processes import (children, command_line, end_all, launcher,
                         reap_orphans, spawn, state, terminate)
from ..settings import DEFAULTS, POSTGRES_PORT
from . import files
from . import postgres_layout as layout
from .postgres import STOP_TIMEOUT, ManagedPostgres, bindir
from .postgres_layout import SUPERUSER

log = logging.getLogger('postgres')

COPY_STALL = 60.0       # seconds pg_basebackup may go without progress
CONNECT_TIMEOUT = '10'  # seconds for pg_basebackup to reach the primary
# The walreceiver's error, again and again, once the primary has removed WAL
# the standby has yet to replay: it can never catch up.
STALE = 'has already been removed'


class ManagedPostgresStandby(ManagedPostgres):
    """Replica `index` (1, 2...) of `primary`, a started ManagedPostgres, on
    port settings.postgres_port (or POSTGRES_PORT) + 10 * index (or a free
    one if taken)."""

    def __init__(self, primary, index, settings=DEFAULTS):
        base = settings.postgres_port or POSTGRES_PORT
        super().__init__(
            os.path.join(settings.var, 'postgres-replica-%d' % index),
            port=base + 10 * index, settings=settings)
        self.primary = primary
        self.name = 'PostgreSQL replica %d' % index
        self._copied = 0    # the log's size once the copy was made

    def password(self, role):
        return self.primary.password(role)

    def initialised(self):
        return False    # so every start is a rebuild (init)

    def init(self):
        """A fresh copy of the primary in data, made standby (-R)."""
        self._end_leftovers()
        shutil.rmtree(self.data, ignore_errors=True)
        p = self.primary
        log.info('copying the PostgreSQL primary at %s:%d into %s',
                 p.host, p.port, self.data)
        started = time.monotonic()
        try:
            password = files.read(os.path.join(p.home, 'superuser.password'))
        except OSError as e:
            raise RuntimeError('%s: no superuser password of the primary: '
                               '%s' % (self.name, e))
        env = dict(os.environ, PGPASSWORD=password.strip(),
                   PGCONNECT_TIMEOUT=CONNECT_TIMEOUT)
        # -c fast: no wait for a spread checkpoint; -N: the standby's start
        # syncs its data directory anyway; -P: progress lines in the log.
        self._watch_copy(spawn(
            launcher('INT', layout.owner(), self.log_file)
            + [os.path.join(bindir(), 'pg_basebackup'), '-D', self.data,
               '-X', 'stream', '-R', '-c', 'fast', '-N', '--no-manifest',
               '-w', '-P', '-v', '-h', p.host, '-p', str(p.port),
               '-U', SUPERUSER],
            env=env, stdin=subprocess.DEVNULL, cwd='/',
            start_new_session=True))
        log.info('copied the primary in %.1f s', time.monotonic() - started)
        self._copied = self._log_size()

    def death(self):
        """How it ended (ManagedPostgres.death), or, while it runs, that
        it fell too far behind to catch up: the watcher rebuilds it."""
        ended_ = super().death()
        if ended_ is None and self.pid is not None and self._stale():
            return ('fell behind the primary, which no longer has the WAL '
                    'it needs')
        return ended_

    def _stale(self):
        """Its walreceiver said, since the copy, that the WAL is gone."""
        size = self._log_size()
        if size <= self._copied:
            return False
        try:
            return STALE in files.read(self.log_file,
                                       tail=min(4096, size - self._copied))
        except OSError:
            return False

    def _watch_copy(self, process):
        """Wait for pg_basebackup: RuntimeError if it fails, stalls or a
        stop() comes (then it and its WAL streamer are ended)."""
        start = self._log_size()
        progress, deadline = start, time.monotonic() + COPY_STALL
        while process.poll() is None:
            if self._log_size() != progress:
                progress = self._log_size()
                deadline = time.monotonic() + COPY_STALL
            if self._stopping or time.monotonic() > deadline:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                terminate(process, STOP_TIMEOUT)
                reap_orphans('pg_basebackup')   # its WAL streamer
                if self._stopping:
                    raise RuntimeError('%s: stopped while starting'
                                       % self.name)
                raise RuntimeError(
                    '%s: pg_basebackup made no progress in %.0f s: %s'
                    % (self.name, COPY_STALL, self._log_since(start)))
            time.sleep(0.05)
        if process.returncode != 0:
            raise RuntimeError(
                '%s could not copy the primary at %s:%d (pg_basebackup exit '
                'status %d): %s' % (
                    self.name, self.primary.host, self.primary.port,
                    process.returncode, self._log_since(start)))

    def _log_size(self):
        try:
            return os.stat(self.log_file).st_size
        except OSError:
            return 0

    def _log_since(self, offset):
        """The last lines the log got after offset."""
        size = self._log_size()
        try:
            return files.read(self.log_file, tail=min(2000, size - offset))
        except OSError as e:
            return str(e)

    def _end_leftovers(self):
        """End what an earlier start left running on data, its server
        killed before it could stop them: a postmaster, or pg_basebackup's
        WAL streamer (only the main process gets the parent-death signal)."""
        found = [pid for pid in map(int, filter(str.isdigit, os.listdir(
            '/proc'))) if self._runs_here(command_line(pid))]
        if not found:
            return
        log.info('%s: ending processes left running in %s: %s', self.name,
                 self.data, found)
        # SIGINT: a postmaster's fast shutdown; SIGKILL for what ignores it
        # (pg_basebackup started with SIGINT ignored, as `cmd &` does).
        if not end_all(found, signal.SIGINT, STOP_TIMEOUT):
            log.warning('%s: processes left running in %s ignore SIGINT: '
                        'killed', self.name, self.data)
            if not end_all(found, signal.SIGKILL, STOP_TIMEOUT):
                raise RuntimeError('%s: processes left running in %s do not '
                                   'stop: %s' % (self.name, self.data, found))
        for name in ('postgres', 'pg_basebackup'):
            reap_orphans(name)

    def _runs_here(self, arguments):
        """A postmaster or pg_basebackup on data, by its command line."""
        return (arguments[:1] != [] and self.data.encode() in arguments
                and os.path.basename(arguments[0]) in (b'postgres',
                                                       b'pg_basebackup'))

    def _progress(self):
        """Its processes' titles: the startup process names each WAL
        segment it replays."""
        if self.pid is None:
            return None
        return sorted(b' '.join(command_line(c)) for c in children(self.pid))

    def prepare(self):
        """Nothing: roles and schema come from the primary."""

    def adopt(self):
        """Never: a start rebuilds it, ending one left running here."""
        return False

    def kill(self):
        """Crash it: SIGKILL the postmaster and each of its processes (it
        stopped first, so that it starts no other meanwhile), and wait
        until they have ended. death() then says 'died with signal 9'."""
        pid = self.pid
        if pid is None or state(pid) in (None, 'Z', 'X'):
            return
        os.kill(pid, signal.SIGSTOP)
        family = [pid] + children(pid)
        if not end_all(family, signal.SIGKILL, STOP_TIMEOUT):
            raise RuntimeError('%s: processes %s outlive SIGKILL'
                               % (self.name, family))
