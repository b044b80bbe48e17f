"""A local PostgreSQL cluster (initdb, pg_ctl) for when no --postgres DSN is
given: it listens on 127.0.0.1 only, every role logs in with a password
(scram-sha-256), and the app's role and database are created at each start.

directory/data is the cluster, directory/port the port it was last started
on, directory/superuser.password the password of the `postgres` superuser
(mode 0600; only this module uses it). Run as root, the cluster belongs to
the system user `postgres`, as initdb and pg_ctl refuse to run as root.
"""
import glob
import logging
import os
import pwd
import secrets
import shutil
import socket
import subprocess

from ..tarantool.managed import answers

log = logging.getLogger('postgres')

ROLE, PASSWORD, DATABASE = 'sticker_app', 'sticker_app', 'stickers'
DEFAULT_PORT = 5433   # not 5432: a system cluster there is left alone
SUPERUSER = 'postgres'
# Appended to postgresql.conf after initdb. Commits do not wait for the WAL
# flush, like Tarantool's default wal_mode 'write'. No Unix socket (a deep
# data directory makes too long a socket path): TCP only.
CONFIG = """
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
max_connections = 200
synchronous_commit = off
"""
# Run by psql as the superuser: the app's role owns its database, no more.
BOOTSTRAP = r"""
SELECT format('CREATE ROLE %I LOGIN PASSWORD %L', :'role', :'password')
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'role') \gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'db', :'role')
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'db') \gexec
"""


def free_port(host):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


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


class ManagedPostgres:
    host = '127.0.0.1'

    def __init__(self, directory, port=DEFAULT_PORT):
        self.directory = os.path.abspath(directory)
        self.data = os.path.join(self.directory, 'data')
        self.port = self._remembered_port() or port
        self.started = False

    @property
    def dsn(self):
        return 'postgresql://%s:%s@%s:%d/%s' % (
            ROLE, PASSWORD, self.host, self.port, DATABASE)

    @property
    def log_file(self):
        return os.path.join(self.directory, 'postgres.log')

    def _path(self, name):
        return os.path.join(self.directory, name)

    def _remembered_port(self):
        try:
            with open(self._path('port')) as f:
                return int(f.read())
        except (OSError, ValueError):
            return None

    def _run(self, tool, *args, input='', **kwargs):
        command = [os.path.join(bindir(), tool)] + list(args)
        if os.geteuid() == 0 and tool != 'psql':
            command = ['runuser', '-u', SUPERUSER, '--'] + command
        result = subprocess.run(command, input=input, capture_output=True,
                                text=True, **kwargs)
        if result.returncode != 0:
            raise RuntimeError('%s failed (%d): %s' % (
                tool, result.returncode, (result.stderr or result.stdout)[-2000:]))
        return result

    def _own(self, path):
        if os.geteuid() == 0:
            user = pwd.getpwnam(SUPERUSER)
            os.chown(path, user.pw_uid, user.pw_gid)

    def initialised(self):
        return os.path.exists(os.path.join(self.data, 'PG_VERSION'))

    def running(self):
        if not self.initialised():
            return False
        try:
            self._run('pg_ctl', 'status', '-D', self.data)
            return True
        except RuntimeError:
            return False

    def init(self):
        os.makedirs(self.directory, exist_ok=True)
        self._own(self.directory)
        password = self._path('superuser.password')
        with open(os.open(password, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                          0o600), 'w') as f:
            f.write(secrets.token_urlsafe(24))
        self._own(password)
        log.info('creating a PostgreSQL cluster in %s', self.data)
        shutil.rmtree(self.data, ignore_errors=True)   # an interrupted initdb
        self._run('initdb', '-D', self.data, '-U', SUPERUSER,
                  '--pwfile', password, '-A', 'scram-sha-256', '-E', 'UTF8',
                  '--no-locale')
        with open(os.path.join(self.data, 'postgresql.conf'), 'a') as f:
            f.write(CONFIG)

    def start(self):
        if not self.initialised():
            self.init()
        if answers(self.host, self.port):
            taken, self.port = self.port, free_port(self.host)
            log.info('port %d is taken: PostgreSQL will use %d', taken, self.port)
        log.info('starting PostgreSQL on %s:%d with data in %s',
                 self.host, self.port, self.data)
        self._run('pg_ctl', 'start', '-D', self.data, '-l', self.log_file,
                  '-w', '-t', '60', '-o', '-p %d' % self.port, timeout=90)
        self.started = True
        with open(self._path('port'), 'w') as f:
            f.write(str(self.port))
        self._bootstrap()

    def _bootstrap(self):
        with open(self._path('superuser.password')) as f:
            env = dict(os.environ, PGPASSWORD=f.read().strip())
        self._run('psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1',
                  '-h', self.host, '-p', str(self.port), '-U', SUPERUSER,
                  '-d', 'postgres', '-v', 'role=' + ROLE,
                  '-v', 'password=' + PASSWORD, '-v', 'db=' + DATABASE,
                  '-f', '-', input=BOOTSTRAP, env=env)

    def stop(self, mode='fast'):
        """Stop the cluster if this object started it."""
        if self.started:
            self._run('pg_ctl', 'stop', '-D', self.data, '-m', mode, '-w')
            self.started = False
            log.info('PostgreSQL stopped')
