"""Open the data interface an engine needs: use the address given, or start
a local database under var/ when nothing answers at the default address,
and load the generated data set into an empty database.

    async with open_databases(engine, settings) as data:
        ...   # data is started and loaded; closed once at the end
"""
import asyncio
import logging
import time
from contextlib import asynccontextmanager

from data_interface import NotSetUp, cancel
from data_interface.address import as_admin
from ..processes import answers
from ..settings import DEFAULTS
from ..supervise import Backoff
from .load import forget_visitors, load_if_empty
from .table import BY_NAME, data_for, of, replicated
from .tarantool import ManagedReplica, check_engine

log = logging.getLogger('databases')

WATCH_EVERY = 0.25        # seconds between looks at the managed databases


def managed(kind, directory, port=None, settings=DEFAULTS):
    """The local database of `kind` (a name of the database table) in
    `directory`, not started."""
    return BY_NAME[kind].managed(directory, port, settings)


class Stopped(Exception):
    """A stop was asked for before the databases were open."""


@asynccontextmanager
async def open_databases(engine, settings, stopped=None):
    """The engine's data interface, started, with data loaded; the local
    databases it needed are started, restarted when they die, and stopped
    at the end, after the data interface is closed. Stopped (with what
    was started stopped) if the event `stopped` is set while they open."""
    databases = Databases(settings)
    try:
        data = await databases.open(engine, stopped)
        try:
            databases.watch()
            yield data
        finally:
            await data.close()
    finally:
        await databases.close()


class Databases:
    """Starts what the engine needs, restarts it when it dies (watch());
    close() undoes what open() started."""

    def __init__(self, settings):
        self.settings = settings
        self.tarantool_address = settings.tarantool
        self.tarantool_admin = None
        self.postgres_dsn = settings.postgres
        self.postgres_owner_dsn = settings.postgres
        self.redis_address = settings.redis
        self.redis_admin = None
        self.rediscluster_address = settings.rediscluster
        self.rediscluster_admin = None
        self.tarantool_replicas = list(settings.tarantool_replicas)
        self.postgres_replicas = list(settings.postgres_replicas)
        self.managed = []
        self._watcher = None

    async def _blocking(self, function, *args):
        return await asyncio.get_event_loop().run_in_executor(
            None, function, *args)

    async def _start(self, server):
        self.managed.append(server)    # stopped by close() even if half-up
        await self._blocking(server.start)

    async def _local(self, kind, port):
        """(app address, loader address, server) of the local database of
        `kind`: started if nothing answers at `port`, adopted if no server
        manages the one that does, else that one, with the passwords kept in
        its directory (neither watched nor stopped here)."""
        s = self.settings
        server = managed(kind, BY_NAME[kind].directory(s), settings=s)
        return (await self._run_here(server, port)) + (server,)

    async def _run_here(self, server, port):
        """(app address, loader address) of `server`, a local database not
        started yet: see _local. What answers at `port` must be its own
        process (check_listener) before its passwords go there."""
        s = self.settings
        server.guard()
        if not await self._blocking(answers, s.db_host, port):
            await self._start(server)
        elif await self._blocking(server.adopt):
            self.managed.append(server)
        else:
            found = (server.found_address(s.app_user),
                     server.found_address(s.admin_user))
            await self._blocking(server.check_listener)
            return found
        return server.address, server.admin_address

    async def find_tarantool(self):
        """The Tarantool address to use: the one given, else the local one
        (see _local), on the storage engine asked for."""
        s = self.settings
        if self.tarantool_address is None:
            self.tarantool_address, self.tarantool_admin, server = (
                await self._local('tarantool', s.managed_tarantool_port))
            # Started here, instance.lua checked it; the others may not be.
            await check_engine(self.tarantool_admin, s.tarantool_engine)
            for index in range(1, s.replicas + 1):
                replica = ManagedReplica(server, index, s)
                await self._blocking(replica.settle_port)
                address, _ = await self._run_here(replica, replica.port)
                self.tarantool_replicas.append(address)
        elif self.tarantool_admin is None:
            self.tarantool_admin = as_admin(self.tarantool_address)
        return self.tarantool_address

    async def find_redis(self):
        """The Redis address to use: the one given, else the local one (see
        _local)."""
        s = self.settings
        if self.redis_address is None:
            self.redis_address, self.redis_admin, _ = await self._local(
                'redis', s.redis_port)
        elif self.redis_admin is None:
            self.redis_admin = as_admin(self.redis_address)
        return self.redis_address

    async def find_rediscluster(self):
        """The Redis Cluster's address to use: the one given, else the
        local one's, each node started, adopted or found as _run_here does
        for one database, then made into a cluster if it is not one yet."""
        s = self.settings
        if self.rediscluster_address is None:
            cluster = managed('rediscluster',
                              BY_NAME['rediscluster'].directory(s),
                              settings=s)
            await self._blocking(cluster.prepare)
            for node in cluster.nodes:
                node.guard()
                if not await self._blocking(answers, s.db_host, node.port):
                    await self._start(node)
                elif await self._blocking(node.adopt):
                    self.managed.append(node)
                else:
                    await self._blocking(node.check_listener)
            await self._blocking(cluster.form)
            self.rediscluster_address = cluster.address
            self.rediscluster_admin = cluster.admin_address
        elif self.rediscluster_admin is None:
            self.rediscluster_admin = as_admin(self.rediscluster_address)
        return self.rediscluster_address

    async def find_postgres(self):
        """The PostgreSQL DSN to use: the one given, the local cluster under
        var/ if it runs, a database answering to the default DSN (before the
        cluster has passwords: found_dsn), else the local cluster, started
        (on a free port if another process holds its own)."""
        if self.postgres_dsn is None:
            from data_interface.postgres.asyncpg_data import can_connect
            s = self.settings
            server = await self._blocking(
                managed, 'postgres', BY_NAME['postgres'].directory(s), None, s)
            default = server.found_dsn()
            if await self._blocking(server.running):
                if await self._blocking(server.adopt):
                    self.managed.append(server)
                await self._blocking(server.check_listener)
                await self._blocking(server.prepare)
            elif default and await can_connect(default):
                if self.settings.replicas:
                    raise RuntimeError(
                        'a PostgreSQL that is not the local cluster answers '
                        'at %s: --replicas starts standbys of the local one '
                        'only' % default.split('@')[-1])
                self.postgres_dsn = self.postgres_owner_dsn = default
                return default
            else:
                await self._start(server)
            server.guard()    # its port settled
            self.postgres_dsn = server.dsn
            self.postgres_owner_dsn = server.owner_dsn
            await self._standbys(server)
        elif self.settings.replicas:
            raise RuntimeError('--replicas starts standbys of the local '
                               'PostgreSQL only')
        return self.postgres_dsn

    async def _standbys(self, primary):
        """Start settings.replicas hot standbys of the local cluster."""
        if not self.settings.replicas:
            return
        from .postgres_standby import ManagedPostgresStandby
        for index in range(1, self.settings.replicas + 1):
            standby = ManagedPostgresStandby(primary, index, self.settings)
            await self._start(standby)
            self.postgres_replicas.append(standby.dsn)

    async def open(self, engine, stopped=None):
        """A started DataInterface for the engine, with data loaded: close()
        it before self.close(). Stopped if the event `stopped` is set first
        (a signal while a database starts)."""
        opening = asyncio.ensure_future(self._open(engine))
        if stopped is None:
            return await opening
        waiting = asyncio.ensure_future(stopped.wait())
        try:
            await asyncio.wait([opening, waiting],
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()
            if not opening.done():
                await cancel(opening)
        if opening.cancelled():
            raise Stopped('stopped while starting')
        return opening.result()

    async def _open(self, engine):
        # One method per database, named as it: the site's data interface,
        # started, and the loader's.
        data, admin = await getattr(self, of(engine).name)(engine)
        try:
            await load_if_empty(data, admin, self.settings)
            if self.settings.forget_visitors:
                await forget_visitors(admin)
            primary = data
            data = replicated(
                engine, data, {'tarantool': self.tarantool_replicas,
                               'postgres': self.postgres_replicas}.get(
                                   of(engine).name),
                self.settings.replica_lag)
            if data is not primary:
                await data.start_replicas()
        except BaseException:
            await data.close()
            raise
        return data

    async def tarantool(self, engine):
        data = data_for(engine, await self.find_tarantool())
        admin = data_for(engine._replace(mode='one'), self.tarantool_admin)
        await data.start()
        return data, admin

    async def postgres(self, engine):
        site = await self.find_postgres()
        admin = data_for(engine, self.postgres_owner_dsn)
        # A backend that writes its tables itself runs as their owner.
        data = data_for(engine, self.postgres_owner_dsn
                        if admin.writes_tables else site)
        admin.min_size = 1
        if getattr(admin, 'schema_of_its_own', False):
            # Made by the owner's account (its start), before the site's
            # account connects to it.
            await admin.start()
            await admin.close()
        await data.start()
        return data, admin

    async def redis(self, engine):
        data = data_for(engine, await self.find_redis())
        admin = data_for(engine._replace(mode='one'), self.redis_admin)
        if self.settings.redis is None:    # ours: limits from settings
            await self._configure_redis(admin)
        try:
            await data.start()
        except NotSetUp:
            # A Redis given by address, without the functions yet.
            await self._configure_redis(admin, keep=True)
            await data.start()
        return data, admin

    async def rediscluster(self, engine):
        data = data_for(engine, await self.find_rediscluster())
        data.read_lag = self.settings.replica_lag
        admin = data_for(engine, self.rediscluster_admin)
        if self.settings.rediscluster is None:    # ours
            await self._configure_redis(admin)
        try:
            await data.start()
        except NotSetUp:
            await self._configure_redis(admin, keep=True)
            await data.start()
        return data, admin

    async def _configure_redis(self, admin, keep=False):
        """Load the functions and set the limits (with keep, only if none
        are set), as the loader."""
        s = self.settings
        await admin.start()
        try:
            limits = await admin.configure(s.session_ttl, s.max_sessions,
                                           s.max_ballots, keep, s.sweep_every)
        finally:
            await admin.close()
        log.info('Redis limits: sessions idle %g s, at most %d sessions and '
                 '%d ballots', *limits)

    def watch(self):
        """Restart the databases started here when they die, from a task."""
        if self.managed and self._watcher is None:
            self._watcher = asyncio.ensure_future(self._watch())

    async def _watch(self):
        backoff = {}    # server -> Backoff
        while True:
            await asyncio.sleep(WATCH_EVERY)
            for server in self.managed:
                try:
                    death = server.death()
                except OSError as e:   # keep watching
                    log.warning('cannot tell whether %s runs: %s',
                                server.name, e)
                    continue
                if death:
                    await self._restart(server, death, backoff)

    async def _restart(self, server, death, backoff):
        """Start it again, with backoff while it keeps failing (supervise)."""
        delays = backoff.setdefault(server, Backoff())
        delay = delays.next(time.monotonic())
        log.warning('%s (pid %s) %s; restarting in %.1f s', server.name,
                    server.pid, death, delay)
        while True:
            await asyncio.sleep(delay)
            try:
                await self._blocking(server.restart)
                break
            except (RuntimeError, OSError) as e:
                delay = delays.next(time.monotonic())
                log.warning('%s did not restart (%s); again in %.1f s',
                            server.name, ' '.join(str(e).split())[-300:],
                            delay)
        delays.started(time.monotonic())
        log.info('%s restarted (pid %s)', server.name, server.pid)

    async def close(self):
        """Stop watching, then stop the databases started here (one being
        restarted once its start is over)."""
        if self._watcher is not None:
            await cancel(self._watcher)
            self._watcher = None
        await self._blocking(self.stop)

    def stop(self):
        while self.managed:
            self.managed.pop().stop()
