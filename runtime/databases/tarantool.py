"""A local Tarantool running instance.lua with its data under var/, for when
no address is given and nothing answers at the default one. Its accounts get
random passwords, kept in DIRECTORY/USER.password (mode 0600); its expiry
limits come from the settings, as its TNT_* environment.

DIRECTORY is 0700 and every file in it 0600 (the instance runs with umask
077): its snapshots and logs hold sessions, addresses and ballots. The
instance gets SIGTERM when the server dies, however it dies (Linux), and
the server holds DIRECTORY/server.lock while it manages it: an instance
found running there when no server holds the lock is adopted (adopt())."""
import logging
import os
import shutil
import subprocess

from data_interface.address import TarantoolAddress
from ..processes import answers, free_port, launcher, spawn
from ..settings import DEFAULTS, ROOT
from . import files
from .files import secret
from .logged import LoggedDatabase

log = logging.getLogger('tarantool')

INSTANCE_LUA = os.path.join(ROOT, 'data_interface', 'tarantool',
                            'instance.lua')


def instance_env(settings):
    """app.lua's storage engine and expiry settings, as its TNT_*
    environment."""
    env = {'TNT_ENGINE': settings.tarantool_engine,
           'TNT_SESSION_TTL': '%g' % settings.session_ttl,
           'TNT_SWEEP_EVERY': '%g' % settings.sweep_every}
    if settings.max_sessions is not None:
        env['TNT_MAX_SESSIONS'] = str(settings.max_sessions)
    if settings.max_ballots is not None:
        env['TNT_MAX_BALLOTS'] = str(settings.max_ballots)
    if settings.snapshots_at_start:
        env['TNT_SNAPSHOTS'] = 'start'
    return env


async def check_engine(admin_address, wanted):
    """RuntimeError unless the site's spaces of the Tarantool at
    admin_address (the loader's account) are on the storage engine
    `wanted`: one found answering on a local port may be another engine's."""
    from data_interface import DataUnavailable
    from data_interface.tarantool.asynctnt_data import AsynctntData
    data = AsynctntData(admin_address)
    try:
        await data.start()
        try:
            found = await data.storage_engine()
        finally:
            await data.close()
    except DataUnavailable as e:
        raise RuntimeError('cannot tell the storage engine of the Tarantool '
                           'at %s:%d: %s' % (admin_address.host,
                                             admin_address.port, e))
    if found != wanted:
        raise RuntimeError(
            'the Tarantool at %s:%d keeps the site on %s, not %s: stop it, or '
            'ask for --tarantool-engine %s' % (
                admin_address.host, admin_address.port, found, wanted, found))


class ManagedTarantool(LoggedDatabase):
    name = 'Tarantool'
    option = '--tarantool'
    pid_file = 'tarantool.pid'
    ready_mark = b'sticker site instance ready'

    def __init__(self, directory, host=None, port=None, env=None,
                 settings=DEFAULTS):
        """env: TNT_* settings over those of `settings` (tests)."""
        super().__init__(directory)
        self.host = host or settings.db_host
        self.port = port or settings.managed_tarantool_port
        self.users = settings.app_user, settings.admin_user
        self.env = dict(instance_env(settings), **(env or {}))
        self.secrets = self.directory    # where the passwords are kept

    @property
    def log_file(self):
        return os.path.join(self.directory, 'tarantool.log')

    def _password(self, user, setting):
        """Given in env (tests), else the one kept in the directory."""
        return self.env.get(setting) or secret(
            os.path.join(self.secrets, user + '.password'), create=True)

    @property
    def address(self):
        user = self.users[0]
        return TarantoolAddress(self.host, self.port, user,
                                self._password(user, 'TNT_APP_PASSWORD'))

    @property
    def admin_address(self):
        return self.address._replace(
            user=self.users[1],
            password=self._password(self.users[1], 'TNT_ADMIN_PASSWORD'))

    def found_address(self, user):
        """The address of an instance found answering here, with the
        password of `user` kept in the directory (none is made);
        RuntimeError if there is none."""
        path = os.path.join(self.secrets, user + '.password')
        password = secret(path)
        if not password:
            raise RuntimeError(
                'a Tarantool answers at %s:%d but %s holds no password for '
                '%s: give its address, --tarantool USER:PASSWORD@HOST:PORT'
                % (self.host, self.port, path, user))
        return TarantoolAddress(self.host, self.port, user, password)

    def _orphan(self):
        passwords = all(os.path.exists(os.path.join(
            self.secrets, user + '.password')) for user in self.users)
        return self.ours() if passwords else None

    def _prepare(self):
        """The directory and its files made private."""
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        files.tighten(self.directory)

    def _launch(self):
        binary = shutil.which('tarantool')
        if binary is None:
            raise RuntimeError('tarantool is not installed: run ./run.sh setup '
                               '(or apt-get install tarantool)')
        env = dict(os.environ, TNT_DIR=self.directory,
                   TNT_LISTEN='%s:%d' % (self.host, self.port),
                   TNT_LOG=self.log_file,
                   TNT_PID_FILE=os.path.join(self.directory, 'tarantool.pid'),
                   TNT_APP_PASSWORD=self.address.password,
                   TNT_ADMIN_PASSWORD=self.admin_address.password)
        env.update(self.env)
        log.info('starting Tarantool on %s:%d with data in %s',
                 self.host, self.port, self.directory)
        return spawn(launcher('TERM') + [binary, INSTANCE_LUA], env=env,
                     cwd=self.directory, stdin=subprocess.DEVNULL,
                     start_new_session=True)

    def _why(self):
        """': why' when instance.lua refused to start (a data directory of
        another engine, no passwords), else ''."""
        said = (self._since_start() or b'').decode('utf-8', 'replace')
        found = [line.split('refusing to start: ', 1)[1].strip()
                 for line in said.splitlines() if 'refusing to start: ' in line]
        return ': ' + found[-1] if found else ''


class ManagedReplica(ManagedTarantool):
    """Read-only replica number `index` of a local primary (a
    ManagedTarantool): its own process, directory (the primary's, with
    -replica-INDEX) and port (the primary's + 10 * INDEX, or a free one if
    taken), the primary's accounts and passwords. It joins the primary
    afresh at every start: a replica is a copy, and an empty directory
    never holds one the primary can no longer feed."""
    KEEP = ('server.lock', 'tarantool.log')

    def __init__(self, primary, index, settings=DEFAULTS):
        super().__init__('%s-replica-%d' % (primary.directory, index),
                         host=primary.host, port=primary.port + 10 * index,
                         env=dict(primary.env, TNT_REPLICA_OF='%s:%d' % (
                             primary.host, primary.port)),
                         settings=settings)
        self.name = 'Tarantool replica %d' % index
        self.secrets = primary.secrets

    def settle_port(self):
        """A free port instead of its own if another process holds that
        (its port is nobody's setting, and no password is sent there)."""
        if answers(self.host, self.port) and self.ours() is None:
            taken, self.port = self.port, free_port(self.host)
            log.info('port %d is taken: %s will use %d', taken, self.name,
                     self.port)

    def _launch(self):
        for name in os.listdir(self.directory):
            if name not in self.KEEP:
                path = os.path.join(self.directory, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.remove(path)
        return super()._launch()
