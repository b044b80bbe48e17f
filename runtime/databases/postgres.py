"""A local PostgreSQL cluster for when no --postgres DSN is given: it
listens on 127.0.0.1 only, every role logs in with a password
(scram-sha-256), and the roles and database are set up at each start.

Roles: sticker_owner owns the database, its schema and every object in it
(applies schema.sql, loads data); sticker_app, the site's, may only connect,
call the site's functions and read stickers and packs (see the end of
schema.sql). Their random passwords are kept in directory/ROLE.password
(mode 0600), the port the cluster last started on when none was set in
directory/port; the server that manages the cluster holds
directory/server.lock.

The cluster itself (data/, postgres.log, superuser.password) lives in
directory/cluster. Run as root, it belongs to the system user postgres
(initdb and postgres refuse to run as root) and directory stays root's
(mode 0710, group postgres, which may only pass through), so that root
never writes where postgres could plant a symbolic link. If postgres
cannot enter the checkout (a clone under /root), the cluster lives in
/var/lib/stickers-postgres/CHECKOUT-HASH instead, one per directory.

The postmaster is the server's own child (not daemonized by pg_ctl): it
gets SIGINT, a fast shutdown, when the server dies, however it dies.
"""
import asyncio
import glob
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from ..processes import (adopt_orphans, answers, ended, free_port, holds,
                         launcher, reap, reap_orphans, spawn, state)
from ..settings import DEFAULTS, POSTGRES_PORT
from . import files
from . import postgres_layout as layout
from .files import secret
from .local import LocalDatabase
from .postgres_layout import ELSEWHERE, SUPERUSER  # noqa: F401 (tests use ELSEWHERE)

log = logging.getLogger('postgres')

START_TIMEOUT = 120.0     # seconds for the postmaster to accept connections
STOP_TIMEOUT = 60.0
WAL_KEEP = '256MB'   # for a standby that fell behind a while
STOP_SIGNALS = {'smart': signal.SIGTERM, 'fast': signal.SIGINT,
                'immediate': signal.SIGQUIT}
# Appended to postgresql.conf after initdb. Commits do not wait for the WAL
# flush, like Tarantool's default wal_mode 'write'. No Unix socket (a deep
# data directory makes too long a socket path): TCP only.
CONFIG = """
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
max_connections = 200
synchronous_commit = off
"""
# Run by psql as the superuser at every start, so passwords follow the
# files; its variables come in \set lines before it, on psql's stdin like
# the script, never on its command line. Clusters made before the owner
# role had the app's role own all.
BOOTSTRAP = r"""
SELECT format('CREATE ROLE %I LOGIN', r) FROM unnest(ARRAY[:'owner', :'app']) r
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) \gexec
SELECT format('ALTER ROLE %I NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD %L',
              :'owner', :'owner_password') \gexec
SELECT format('ALTER ROLE %I NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD %L',
              :'app', :'app_password') \gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'db', :'owner')
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'db') \gexec
\connect :db
REASSIGN OWNED BY :"app" TO :"owner";
REVOKE ALL ON DATABASE :"db" FROM PUBLIC;
GRANT CONNECT ON DATABASE :"db" TO :"app";
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
"""


def bindir():
    """Where pg_ctl is: on PATH, else Debian's newest /usr/lib/postgresql."""
    found = shutil.which('pg_ctl')
    if found:   # maybe a symlink, and psql may be Debian's pg_wrapper
        return os.path.dirname(os.path.realpath(found))
    versions = glob.glob('/usr/lib/postgresql/*/bin/pg_ctl')
    if not versions:
        raise RuntimeError('PostgreSQL is not installed: run ./run.sh setup '
                           '(or apt-get install postgresql)')
    versions.sort(key=lambda p: [int(x) for x in p.split('/')[4].split('.')
                                 if x.isdigit()])
    return os.path.dirname(versions[-1])


def program(name):
    """A PostgreSQL program (pgbench) on PATH, else Debian's newest, else
    None."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob('/usr/lib/postgresql/*/bin/' + name))
    return candidates[-1] if candidates else None


def psql_literal(text):
    """text quoted for psql's set command: within quotes, a backslash
    escapes the next character."""
    escaped = text.replace('\\', '\\\\').replace("'", "\\'")
    return "'%s'" % escaped.replace('\n', '\\n').replace('\r', '\\r')


def in_thread(coroutine):
    """Run a coroutine to its end from sync code, even inside a running
    loop (its own loop, in a thread of its own)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


class ManagedPostgres(LocalDatabase):
    name = 'PostgreSQL'
    option = '--postgres'

    def __init__(self, directory, port=None, settings=DEFAULTS):
        super().__init__(directory)
        self.host = settings.db_host
        self.app, self.owner = settings.app_user, settings.owner_user
        self.database = settings.database
        self.home = layout.home_of(self.directory)
        # Where it runs, if it does; else a port set (given, or
        # STICKERS_POSTGRES_PORT) wins over the one remembered, which a
        # copied checkout has from its original.
        self.port_set = bool(port or settings.postgres_port)
        self.port = (self._running_port() or port or settings.postgres_port
                     or self._remembered_port() or POSTGRES_PORT)
        self.started = False    # managed by this object: stop() stops it
        self.process = None     # the postmaster, if this object started it
        self.pid = None         # the postmaster's

    data = property(lambda self: os.path.join(self.home, 'data'))

    def password(self, role):
        return secret(os.path.join(self.directory, role + '.password'),
                      create=True)

    def _dsn(self, role):
        return 'postgresql://%s:%s@%s:%d/%s' % (
            role, self.password(role), self.host, self.port, self.database)

    @property
    def dsn(self):
        """The site's: may only call its functions."""
        return self._dsn(self.app)

    @property
    def owner_dsn(self):
        """The owner's: applies the schema, loads data."""
        return self._dsn(self.owner)

    def found_dsn(self):
        """The site's DSN for a database found answering at this port that
        is not this cluster, the role's name as its password; None once a
        password is kept here (this cluster's, sent to no other)."""
        if os.path.lexists(os.path.join(self.directory,
                                        self.app + '.password')):
            return None
        return 'postgresql://%s:%s@%s:%d/%s' % (
            self.app, self.app, self.host, self.port, self.database)

    @property
    def log_file(self):
        return os.path.join(self.home, 'postgres.log')

    def _running_port(self):
        """The port in postmaster.pid (its 4th line) while that postmaster
        runs, else None."""
        if self.postmaster() is None:
            return None
        try:
            return int(files.read(self.pid_path).split('\n')[3])
        except (OSError, ValueError, IndexError):
            return None

    def _remembered_port(self):
        try:
            return int(files.read(os.path.join(self.directory, 'port')))
        except (OSError, ValueError):
            return None

    def _run(self, tool, *args, input='', **kwargs):
        command = [os.path.join(bindir(), tool)] + list(args)
        if tool != 'psql':
            command = launcher(user=layout.owner()) + command
        result = subprocess.run(command, input=input, capture_output=True,
                                text=True, **kwargs)
        if result.returncode != 0:
            raise RuntimeError('%s failed (%d): %s' % (
                tool, result.returncode, (result.stderr or result.stdout)[-2000:]))
        return result

    def initialised(self):
        return layout.initialised(self.home)

    def running(self):
        return self.postmaster() is not None

    def postmaster(self):
        """The pid in data/postmaster.pid if that process runs, else None."""
        try:
            pid = int(files.read(os.path.join(self.data, 'postmaster.pid'))
                      .split('\n', 1)[0])
        except (OSError, ValueError):
            return None
        return pid if state(pid) not in (None, 'Z', 'X') else None

    def _prepare(self):
        """The directories settled (layout.settle)."""
        if self.home == self.directory and self.running():
            raise RuntimeError(
                'PostgreSQL runs from %s, where older versions made it: stop '
                'it (pg_ctl stop -D %s, as its owner) and start again'
                % (self.data, self.data))
        self.home = layout.settle(self.directory, self.home)

    def init(self):
        if self.home == layout.elsewhere(self.directory):
            log.info('the postgres user cannot enter %s: the cluster lives '
                     'in %s', self.directory, self.home)
        password = os.path.join(self.home, 'superuser.password')
        if os.path.lexists(password):
            os.remove(password)   # an interrupted initdb's
        secret(password, create=True)
        layout.own(password)
        log.info('creating a PostgreSQL cluster in %s', self.data)
        shutil.rmtree(self.data, ignore_errors=True)   # an interrupted initdb
        self._run('initdb', '-D', self.data, '-U', SUPERUSER,
                  '--pwfile', password, '-A', 'scram-sha-256', '-E', 'UTF8',
                  '--no-locale')
        files.append(os.path.join(self.data, 'postgresql.conf'), CONFIG)

    @property
    def pid_path(self):
        return os.path.join(self.data, 'postmaster.pid')

    def _take(self, pid):
        self.started, self.pid, self.process = True, pid, None

    def _start(self):
        if not self.initialised():
            self.init()
        if self._stopping:
            raise RuntimeError('PostgreSQL: stopped while starting')
        if not self.started and answers(self.host, self.port):
            taken, self.port = self.port, free_port(self.host)
            log.info('port %d is taken: PostgreSQL will use %d',
                     taken, self.port)
        log.info('starting PostgreSQL on %s:%d with data in %s',
                 self.host, self.port, self.data)
        adopt_orphans()
        self.process = spawn(
            launcher('INT', layout.owner(), self.log_file)
            + [os.path.join(bindir(), 'postgres'), '-D', self.data,
               '-p', str(self.port), '-c', 'wal_keep_size=' + WAL_KEEP],
            stdin=subprocess.DEVNULL, cwd='/', start_new_session=True)
        self.pid = self.process.pid
        self.started = True
        deadline = time.monotonic() + START_TIMEOUT
        progress = self._progress()
        while not self._ready():
            now = self._progress()
            if now != progress:
                progress, deadline = now, time.monotonic() + START_TIMEOUT
            if self.process.poll() is not None:
                raise RuntimeError('PostgreSQL %s: %s' % (
                    ended(self.process), self._log_tail()))
            if self._stopping or time.monotonic() > deadline:
                self._shutdown(signal.SIGINT)
                if self._stopping:
                    raise RuntimeError('PostgreSQL: stopped while starting')
                raise RuntimeError('PostgreSQL did not start within %.0f s: '
                                   '%s' % (START_TIMEOUT, self._log_tail()))
            time.sleep(0.05)
        if not self.port_set:
            files.write(os.path.join(self.directory, 'port'), str(self.port))
        self.prepare()

    def _progress(self):
        """What changes as a start advances, each change allowing
        START_TIMEOUT more (a standby's replay); here nothing."""
        return None

    def _ready(self):
        """The postmaster says it accepts connections, and does."""
        try:
            lines = files.read(os.path.join(self.data, 'postmaster.pid'))
        except OSError:
            return False
        lines = lines.split('\n')
        return (lines[0] == str(self.pid) and len(lines) > 7
                and lines[7].strip() == 'ready'
                and answers(self.host, self.port)
                and holds(self.pid, self.port, self.host))

    def _log_tail(self):
        try:
            return files.read(self.log_file, tail=2000)
        except OSError as e:
            return str(e)

    def prepare(self):
        """Roles and passwords, then the schema as the owner."""
        from data_interface.postgres.asyncpg_data import PostgresData
        env = dict(os.environ, PGPASSWORD=files.read(os.path.join(
            self.home, 'superuser.password')).strip())
        names = (('owner', self.owner),
                 ('owner_password', self.password(self.owner)),
                 ('app', self.app), ('app_password', self.password(self.app)),
                 ('db', self.database))
        script = ''.join('\\set %s %s\n' % (name, psql_literal(value))
                         for name, value in names) + BOOTSTRAP
        self._run('psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1',
                  '-h', self.host, '-p', str(self.port), '-U', SUPERUSER,
                  '-d', 'postgres', '-f', '-', input=script, env=env)

        async def apply_schema():
            owner = PostgresData(self.owner_dsn, min_size=1)
            await owner.start()
            await owner.close()
            # The SQLAlchemy driver's own schema, where this process uses
            # that driver (imported for no other: its memory is theirs).
            if 'data_interface.orm.sqlalchemy_data' in sys.modules:
                orm = sys.modules['data_interface.orm.sqlalchemy_data']
                owner = orm.SqlalchemyData(self.owner_dsn, min_size=1)
                await owner.start()
                await owner.close()
        in_thread(apply_schema())

    def death(self):
        """None while the postmaster runs, else how it ended."""
        if self.pid is None:
            return None
        if self.process is not None:
            ended_ = self.process.poll() is not None and ended(self.process)
        else:     # adopted: not ours to wait for
            ended_ = state(self.pid) in (None, 'Z', 'X') and 'is gone'
        if ended_:
            reap_orphans('postgres')
        return ended_ or None

    def _shutdown(self, sig, timeout=STOP_TIMEOUT):
        """Signal the postmaster (SIGINT: fast shutdown) and wait until it
        has exited; never SIGKILL: it would leave its backends running."""
        ours = self.process is not None and self.process.poll() is None
        pid = self.process.pid if ours else self.postmaster()
        if pid is None:
            return
        os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while True:
            if ours:
                if self.process.poll() is not None:
                    break
            elif state(pid) in (None, 'Z', 'X'):
                reap(pid)
                break
            if time.monotonic() > deadline:
                log.warning('PostgreSQL (pid %d) has not stopped after %.0f '
                            's', pid, timeout)
                break
            time.sleep(0.05)
        reap_orphans('postgres')

    def stop(self, mode='fast'):
        """Stop the cluster if this object manages it (and it still runs,
        or is being restarted: then once that start is over)."""
        self._stopping = True
        with self._lock:
            try:
                if not self.started:
                    return
                self.started = False
                ours = self.process and self.process.poll() is None
                if self.postmaster() is None and not ours:
                    log.info('PostgreSQL was not running')
                    return
                self._shutdown(STOP_SIGNALS[mode])
                log.info('PostgreSQL stopped')
            finally:
                self._unmanage()
