"""A local redis-server with its data under var/redis, for when no --redis
address is given. Its two accounts (data_interface/redis/accounts.py) get
random passwords, kept in DIRECTORY/USER.password (0600); the default user
is off. It listens on the loopback only, keeps every write in its
append-only file before answering (appendfsync always, unless
--redis-fsync everysec), holds at most
redis_memory bytes (writes past it fail: 503) and is written to DIRECTORY/
redis.conf at each start.

As for Tarantool: DIRECTORY is 0700, the server gets SIGTERM when
server.py dies, and one found running with no server holding
DIRECTORY/server.lock is adopted."""
import glob
import logging
import os
import shutil
import subprocess
import time

import redis as redis_py

from data_interface.address import RedisAddress
from data_interface.redis.accounts import acl_lines
from ..processes import launcher, spawn
from ..settings import DEFAULTS
from . import files
from .files import secret
from .logged import LoggedDatabase

log = logging.getLogger('redis')

# Redis's own threshold: the append-only file is rewritten once this much
# has been appended since its last rewrite (and it has doubled).
REWRITE_AFTER = 64 * 1024 * 1024
REWRITE_TIMEOUT = 300.0

CONFIG = """# Written by server.py at each start: edits are lost.
bind {host}
port {port}
protected-mode yes
daemonize no
dir {directory}
pidfile {directory}/redis.pid
logfile {directory}/redis.log
# always: every write is in the append-only file, fsynced, before it is
# answered; everysec: written, fsynced within a second or two.
appendonly yes
appendfsync {fsync}
appenddirname aof
# Rewritten once it has grown by this much (%) since the last rewrite.
auto-aof-rewrite-percentage {growth}
auto-aof-rewrite-min-size {rewrite_after}
save ""
maxmemory {memory}
maxmemory-policy noeviction
# A session's hash (a 256-byte user agent) stays a compact listpack.
hash-max-listpack-value 512
"""


class ManagedRedis(LoggedDatabase):
    name = 'Redis'
    option = '--redis'
    pid_file = 'redis.pid'
    ready_mark = b'Ready to accept connections'
    growth = 100    # auto-aof-rewrite-percentage

    def __init__(self, directory, host=None, port=None, memory=None,
                 passwords=None, settings=DEFAULTS):
        """passwords: {user: password} over the ones kept (tests)."""
        super().__init__(directory)
        self.host = host or settings.db_host
        self.port = port or settings.redis_port
        self.memory = memory or settings.redis_memory
        self.fsync = settings.redis_fsync
        # --snapshots-at-start (the bench): no rewrite while serving; _start
        # makes it, once due.
        if settings.snapshots_at_start:
            self.growth = 0
        self.rewrite_after = REWRITE_AFTER
        self.users = settings.app_user, settings.admin_user
        self.passwords = passwords or {}

    @property
    def log_file(self):
        return os.path.join(self.directory, 'redis.log')

    def _password(self, user):
        return self.passwords.get(user) or secret(
            os.path.join(self.directory, user + '.password'), create=True)

    def _address(self, user):
        return RedisAddress(self.host, self.port, user, self._password(user), 0)

    @property
    def address(self):
        return self._address(self.users[0])

    @property
    def admin_address(self):
        return self._address(self.users[1])

    def found_address(self, user):
        """The address of a Redis found answering here, with the password
        of `user` kept in the directory; RuntimeError if there is none."""
        path = os.path.join(self.directory, user + '.password')
        password = secret(path)
        if not password:
            raise RuntimeError(
                'a server answers at %s:%d but %s holds no password for %s: '
                'give its address, --redis redis://USER:PASSWORD@HOST:PORT/DB'
                % (self.host, self.port, path, user))
        return RedisAddress(self.host, self.port, user, password, 0)

    def _prepare(self):
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        files.tighten(self.directory)

    def _settings(self):
        return CONFIG.format(host=self.host, port=self.port,
                             directory=self.directory, memory=self.memory,
                             fsync=self.fsync,
                             growth=self.growth,
                             rewrite_after=self.rewrite_after)

    def _config(self):
        """redis.conf, with the accounts (their passwords hashed)."""
        text = self._settings()
        users = acl_lines(*[self._password(u) for u in self.users])
        path = os.path.join(self.directory, 'redis.conf')
        files.write(path, text + '\n'.join(users) + '\n')
        return path

    def _launch(self):
        binary = shutil.which('redis-server')
        if binary is None:
            raise RuntimeError('redis-server is not installed: run ./run.sh '
                               'setup (or apt-get install redis-server)')
        log.info('starting Redis on %s:%d with data in %s',
                 self.host, self.port, self.directory)
        return spawn(launcher('TERM') + [binary, self._config()],
                     env=dict(os.environ), cwd=self.directory,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     start_new_session=True)

    def _why(self):
        """': why' from its log when it ended while starting (its last
        warning, and the one before an 'aborting'), else ''."""
        said = (self._since_start() or b'').decode('utf-8', 'replace')
        found = [line.split(' # ', 1)[1].strip()
                 for line in said.splitlines() if ' # ' in line]
        # What failed, then that it gave up; else the last alone.
        found = found[-2:] if found and found[-1].endswith('aborting.') \
            else found[-1:]
        return ': ' + '; '.join(found).rstrip('.') if found else ''

    # With --snapshots-at-start, the rewrite it does not make while serving.
    def _start(self):
        super()._start()
        if not self.growth and self.appended() >= self.rewrite_after:
            try:    # the data is safe without it: only a restart is longer
                self.rewrite()
            except (RuntimeError, redis_py.RedisError) as e:
                log.warning('serving without the rewrite: %s', e)

    def appended(self):
        """Bytes appended since the last rewrite of the append-only file."""
        return sum(os.path.getsize(p) for p in glob.glob(
            os.path.join(self.directory, 'aof', '*.incr.aof')))

    def rewrite(self):
        """Rewrite the append-only file, as the loader's account, and wait
        until it is done."""
        address = self.admin_address
        log.info('rewriting the append-only file of %s:%d (%d bytes appended)',
                 self.host, self.port, self.appended())
        with redis_py.Redis(host=address.host, port=address.port,
                            username=address.user, password=address.password,
                            decode_responses=True, socket_timeout=10) as c:
            c.bgrewriteaof()
            deadline = time.monotonic() + REWRITE_TIMEOUT
            while True:
                state = c.info('persistence')
                if not (state['aof_rewrite_in_progress']
                        or state['aof_rewrite_scheduled']):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError('%s: the append-only file rewrite did '
                                       'not end in %.0f s; see %s' % (
                                           self.name, REWRITE_TIMEOUT,
                                           self.log_file))
                time.sleep(0.05)
        if state['aof_last_bgrewrite_status'] != 'ok':
            raise RuntimeError('%s: the append-only file rewrite failed; see '
                               '%s' % (self.name, self.log_file))
