"""A local PostgreSQL cluster (initdb, pg_ctl) for when no --postgres DSN is
given: it listens on 127.0.0.1 only, every role logs in with a password
(scram-sha-256), and the roles and database are set up at each start.

Roles: sticker_owner owns the database, its schema and every object in it
(applies schema.sql, loads data); sticker_app, the site's, may only connect,
call the site's functions and read stickers and packs (see the end of
schema.sql). Their random passwords are kept in directory/ROLE.password
(mode 0600), the port the cluster was last started on in directory/port.

The cluster itself (data/, postgres.log, superuser.password) lives in
directory too, unless run as root and the system user `postgres` (initdb
and pg_ctl refuse to run as root) cannot enter it, e.g. a checkout under
/root: then in /var/lib/stickers-postgres/CHECKOUT-HASH, one per directory.
"""
import asyncio
import glob
import hashlib
import logging
import os
import pwd
import shutil
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor

from processes import (adopt_orphans, answers, free_port, reap, reap_orphans,
                       state)
from settings import DEFAULTS
from ..address import secret

log = logging.getLogger('postgres')

SUPERUSER = 'postgres'
ELSEWHERE = '/var/lib/stickers-postgres'
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
# files. Clusters made before the owner role had the app's role own all.
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


def as_root():
    return os.geteuid() == 0


def in_thread(coroutine):
    """Run a coroutine to its end from sync code, even inside a running
    loop (its own loop, in a thread of its own)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


class ManagedPostgres:
    name = 'PostgreSQL'

    def __init__(self, directory, port=None, settings=DEFAULTS):
        self.directory = os.path.abspath(directory)
        self.host = settings.db_host
        self.app, self.owner = settings.app_user, settings.owner_user
        self.database = settings.database
        port = port or settings.postgres_port
        self.home = self._home()
        self.data = os.path.join(self.home, 'data')
        self.port = self._remembered_port() or port
        self.started = False    # by this object: stop() stops it
        self.pid = None         # the postmaster's
        self._lock = threading.Lock()   # start() and stop() one at a time
        self._stopping = False

    def _home(self):
        """Where the cluster lives: in directory if the postgres user can
        reach it (or was made there), else in a directory of its own."""
        checkout = os.path.dirname(os.path.dirname(self.directory))
        elsewhere = os.path.join(ELSEWHERE, '%s-%s' % (
            os.path.basename(checkout) or 'stickers',
            hashlib.sha1(self.directory.encode()).hexdigest()[:10]))
        if not as_root() or self._initialised(self.directory):
            return self.directory
        if self._initialised(elsewhere):
            return elsewhere
        parent = os.path.dirname(self.directory)
        while not os.path.isdir(parent):
            parent = os.path.dirname(parent)
        reachable = subprocess.run(
            ['runuser', '-u', SUPERUSER, '--', 'test', '-x', parent],
            stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
        return self.directory if reachable else elsewhere

    @staticmethod
    def _initialised(home):
        return os.path.exists(os.path.join(home, 'data', 'PG_VERSION'))

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

    @property
    def log_file(self):
        return os.path.join(self.home, 'postgres.log')

    def _remembered_port(self):
        try:
            with open(os.path.join(self.directory, 'port')) as f:
                return int(f.read())
        except (OSError, ValueError):
            return None

    def _run(self, tool, *args, input='', **kwargs):
        command = [os.path.join(bindir(), tool)] + list(args)
        if as_root() and tool != 'psql':
            command = ['runuser', '-u', SUPERUSER, '--'] + command
        result = subprocess.run(command, input=input, capture_output=True,
                                text=True, **kwargs)
        if result.returncode != 0:
            raise RuntimeError('%s failed (%d): %s' % (
                tool, result.returncode, (result.stderr or result.stdout)[-2000:]))
        return result

    def _own(self, path):
        if as_root():
            user = pwd.getpwnam(SUPERUSER)
            os.chown(path, user.pw_uid, user.pw_gid)

    def initialised(self):
        return self._initialised(self.home)

    def running(self):
        if not self.initialised():
            return False
        try:
            self._run('pg_ctl', 'status', '-D', self.data)
            return True
        except RuntimeError:
            return False

    def postmaster(self):
        """The pid in data/postmaster.pid if that process runs, else None."""
        try:
            with open(os.path.join(self.data, 'postmaster.pid')) as f:
                pid = int(f.readline())
        except (OSError, ValueError):
            return None
        return pid if state(pid) not in (None, 'Z', 'X') else None

    def init(self):
        os.makedirs(self.directory, exist_ok=True)
        if self.home != self.directory:
            log.info('the postgres user cannot enter %s: the cluster lives '
                     'in %s', self.directory, self.home)
            os.makedirs(ELSEWHERE, mode=0o755, exist_ok=True)
            os.makedirs(self.home, mode=0o700, exist_ok=True)
        self._own(self.home)
        password = os.path.join(self.home, 'superuser.password')
        if os.path.exists(password):
            os.remove(password)   # an interrupted initdb's
        secret(password, create=True)
        self._own(password)
        log.info('creating a PostgreSQL cluster in %s', self.data)
        shutil.rmtree(self.data, ignore_errors=True)   # an interrupted initdb
        self._run('initdb', '-D', self.data, '-U', SUPERUSER,
                  '--pwfile', password, '-A', 'scram-sha-256', '-E', 'UTF8',
                  '--no-locale')
        with open(os.path.join(self.data, 'postgresql.conf'), 'a') as f:
            f.write(CONFIG)

    def start(self):
        """Start (blocking: run it off the event loop), set the roles up
        and apply the schema. A restart keeps the port."""
        with self._lock:
            self._stopping = False
            self._start()

    def restart(self):
        """start(), unless a stop() came first."""
        with self._lock:
            if self._stopping:
                raise RuntimeError('PostgreSQL is being stopped')
            self._start()

    def _start(self):
        if not self.initialised():
            self.init()
        if not self.started and answers(self.host, self.port):
            taken, self.port = self.port, free_port(self.host)
            log.info('port %d is taken: PostgreSQL will use %d',
                     taken, self.port)
        log.info('starting PostgreSQL on %s:%d with data in %s',
                 self.host, self.port, self.data)
        adopt_orphans()
        self._run('pg_ctl', 'start', '-D', self.data, '-l', self.log_file,
                  '-w', '-t', '60', '-o', '-p %d' % self.port, timeout=90)
        self.started = True
        self.pid = self.postmaster()
        with open(os.path.join(self.directory, 'port'), 'w') as f:
            f.write(str(self.port))
        self.prepare()

    def prepare(self):
        """Roles and passwords, then the schema as the owner."""
        from .asyncpg_data import PostgresData
        with open(os.path.join(self.home, 'superuser.password')) as f:
            env = dict(os.environ, PGPASSWORD=f.read().strip())
        self._run('psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1',
                  '-h', self.host, '-p', str(self.port), '-U', SUPERUSER,
                  '-d', 'postgres', '-v', 'owner=' + self.owner,
                  '-v', 'owner_password=' + self.password(self.owner),
                  '-v', 'app=' + self.app,
                  '-v', 'app_password=' + self.password(self.app),
                  '-v', 'db=' + self.database, '-f', '-', input=BOOTSTRAP,
                  env=env)

        async def apply_schema():
            owner = PostgresData(self.owner_dsn, min_size=1)
            await owner.start()
            await owner.close()
        in_thread(apply_schema())

    def death(self):
        """None while the postmaster runs, else how it ended."""
        if self.pid is None:
            return None
        ended = reap(self.pid)   # ours to reap once pg_ctl has exited
        if ended is None and state(self.pid) in (None, 'Z', 'X'):
            ended = 'is gone'
        if ended:
            reap_orphans('postgres')
        return ended

    def stop(self, mode='fast'):
        """Stop the cluster if this object started it (and it still runs,
        or is being restarted: then once that start is over)."""
        self._stopping = True
        with self._lock:
            if not self.started:
                return
            self.started = False
            if self.postmaster() is None:
                log.info('PostgreSQL was not running')
                return
            self._run('pg_ctl', 'stop', '-D', self.data, '-m', mode, '-w')
            if self.pid is not None:
                reap(self.pid, timeout=5)
                reap_orphans('postgres')
            log.info('PostgreSQL stopped')
