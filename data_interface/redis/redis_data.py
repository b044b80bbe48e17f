"""DataInterface on Redis through redis-py's asyncio client (with hiredis):
every operation is one FCALL of a function of stickers.lua, over one
shared connection (mode 'one': commands written in batches as they come,
replies matched in order) or a pool of connections (mode 'pool')."""
import asyncio
import os
import re
from collections import deque

import redis.asyncio as redis
from redis.exceptions import NoPermissionError, RedisError, ResponseError

from .. import KEEPALIVE, REFUSED, DataUnavailable, FunctionCalls, NotSetUp
from ..address import check_listener, no_password

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       'stickers.lua'), encoding='utf-8') as _f:
    LIBRARY = _f.read()
VERSION = re.search(r"^local VERSION = '(\w+)'", LIBRARY, re.M).group(1)

# The functions that only read (FCALL_RO: they run even when Redis is out
# of memory), and the key only the loader's account may name.
READ_ONLY = ('top_stickers', 'bottom_stickers', 'site_stats', 'list_packs',
             'pack_stickers', 'get_sticker', 'limits', 'stickers_version')
ADMIN_KEY = 'st:admin'
EXPIRE_BATCH = 200    # per call: Redis serves nothing else meanwhile
# A session and a ballot with the longest strings, keys and index entries
# included, measured with MEMORY USAGE and INFO on 7.0 (README): with a
# margin, sessions get half of maxmemory and ballots a quarter, as on
# Tarantool.
SESSION_BYTES, BALLOT_BYTES = 800, 480
UNAVAILABLE = (RedisError, OSError, asyncio.TimeoutError)


def caps(maxmemory, max_sessions=None, max_ballots=None):
    """(max_sessions, max_ballots) that fit maxmemory bytes (0: no limit,
    then the ones given or a million each); never above what fits."""
    if not maxmemory:
        return max_sessions or 1000000, max_ballots or 1000000
    fit_sessions = maxmemory // 2 // SESSION_BYTES
    fit_ballots = maxmemory // 4 // BALLOT_BYTES
    return (min(max_sessions or fit_sessions, fit_sessions),
            min(max_ballots or fit_ballots, fit_ballots))


def argument(value):
    """An FCALL argument: text (lone surrogates replaced, as PostgreSQL's
    driver does) or a number; anything else is refused here."""
    if isinstance(value, str):
        return value.encode('utf-8', 'replace')
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(value).encode()
    raise DataUnavailable('%s: %r is neither text nor a number'
                          % (REFUSED, type(value).__name__))


async def batched(call):
    """(sessions, ballots) that call(EXPIRE_BATCH) removed, called again
    until a call removes fewer of both than that."""
    removed = [0, 0]
    while True:
        batch = await call(EXPIRE_BATCH)
        removed = [removed[0] + batch[0], removed[1] + batch[1]]
        if max(batch[:2]) < EXPIRE_BATCH:
            return tuple(removed)


class Link:
    """One open connection of Shared: what waits to be written, and what
    waits for its reply, in order."""

    def __init__(self, conn):
        self.conn = conn
        self.queue = []           # (packed command, future) to write
        self.pending = deque()    # futures written, in order
        self.replies = 0          # read so far
        self.wake = asyncio.Event()
        self.tasks = []


class Connection(redis.Connection):
    """Sends its password only once check_listener() has passed."""

    async def _connect(self):
        await super()._connect()
        check_listener(self.host, self.port)

    async def _send_packed_command(self, command):
        # A write to a link that another task's disconnect() has closed:
        # uvloop says RuntimeError ('the handler is closed'), asyncio
        # ConnectionResetError, and once it is gone AttributeError on None:
        # each is a lost connection, which redis-py then tidies up.
        try:
            await super()._send_packed_command(command)
        except (RuntimeError, AttributeError) as e:
            raise redis.ConnectionError('connection closed: %s' % e) from e


class Shared:
    """One connection that many coroutines use at once: a writer task sends
    what has queued up in one write, a reader task hands the replies back
    in order. Lost, it fails what is in flight and is opened again by the
    next call (at most every reconnect_after seconds). A call that waited
    `timeout` s while the connection answered nothing at all (a dead link
    that no reset announced) drops it: the next call opens a new one."""
    reconnect_after = 0.3

    def __init__(self, open_connection, timeout):
        self._open_connection = open_connection
        self.timeout = timeout
        self._link = None
        self._opening = None
        self._failed_at = None

    async def execute(self, *args):
        link = self._link or await self._connect()
        loop = asyncio.get_event_loop()
        future = loop.create_future()
        link.queue.append((link.conn.pack_command(*args), future))
        link.wake.set()
        timer = loop.call_later(self.timeout, self._late, future, link,
                                link.replies)
        try:
            return await future
        finally:
            timer.cancel()

    def _late(self, future, link, replies):
        if future.done():
            return
        error = asyncio.TimeoutError('no answer in %g s' % self.timeout)
        future.set_exception(error)
        if link.replies == replies and self._link is link:   # silent
            self._lost(link, error)

    async def _connect(self):
        loop = asyncio.get_event_loop()
        if self._opening is None:
            if (self._failed_at is not None
                    and loop.time() - self._failed_at < self.reconnect_after):
                raise ConnectionError('not connected')
            self._opening = asyncio.ensure_future(self._open())
        opening = self._opening
        try:
            return await asyncio.shield(opening)
        finally:
            if opening.done() and self._opening is opening:
                self._opening = None

    async def _open(self):
        conn = self._open_connection()
        try:
            # Connecting includes AUTH, which a stopped Redis never answers.
            await asyncio.wait_for(conn.connect(), self.timeout)
        except BaseException:
            self._failed_at = asyncio.get_event_loop().time()
            await conn.disconnect()
            raise
        self._failed_at = None
        link = self._link = Link(conn)
        link.tasks = [asyncio.ensure_future(self._write(link)),
                      asyncio.ensure_future(self._read(link))]
        return link

    async def _write(self, link):
        try:
            while True:
                await link.wake.wait()
                link.wake.clear()
                batch, link.queue = link.queue, []
                chunks = []
                for packed, future in batch:
                    if not future.done():
                        link.pending.append(future)
                        chunks.extend(packed)
                if chunks:
                    # redis-py would open a closed connection again itself,
                    # out of step with the reader.
                    if not link.conn.is_connected:
                        raise ConnectionError('connection closed')
                    await link.conn.send_packed_command(chunks,
                                                        check_health=False)
        except Exception as e:     # whatever it was, the link is unusable
            self._lost(link, e)

    async def _read(self, link):
        try:
            while True:
                try:
                    reply = await link.conn.read_response()
                except ResponseError as e:     # an error reply
                    reply = e
                link.replies += 1
                future = link.pending.popleft()
                if future.done():              # timed out: drop its reply
                    continue
                if isinstance(reply, ResponseError):
                    future.set_exception(reply)
                else:
                    future.set_result(reply)
        except Exception as e:     # lost, or out of step: unusable
            self._lost(link, e)

    def _lost(self, link, error):
        """Fail what the link holds; the next call opens a new one."""
        if self._link is link:
            self._link = None
        for task in link.tasks:
            task.cancel()
        waiting = list(link.pending) + [f for _, f in link.queue]
        link.pending.clear()
        link.queue = []
        for future in waiting:
            if not future.done():
                future.set_exception(ConnectionError(
                    'connection lost: %s' % (error or 'closed')))
        asyncio.ensure_future(link.conn.disconnect(nowait=True))

    async def close(self):
        if self._opening is not None:
            self._opening.cancel()
        link = self._link
        if link is not None:
            self._lost(link, None)
            await asyncio.gather(*link.tasks, return_exceptions=True)
            await link.conn.disconnect()


class RedisData(FunctionCalls):
    """mode 'one': one shared connection (Shared); mode 'pool': up to
    max_size connections, a call waiting `timeout` s at most for one."""

    sweeps_itself = False

    def __init__(self, address, mode='one', max_size=16, timeout=3.0):
        if mode not in ('one', 'pool'):
            raise ValueError('mode must be one or pool, not %r' % mode)
        self.address = address
        self.mode = mode
        self.max_size = max_size
        self.timeout = timeout
        self._client = None

    def __str__(self):
        return str(self.address)

    def _options(self):
        a = self.address
        return dict(host=a.host, port=a.port, username=a.user,
                    password=a.password, db=a.db, decode_responses=True,
                    socket_connect_timeout=2.0, socket_keepalive=True,
                    socket_keepalive_options=KEEPALIVE)

    async def start(self):
        if self.address.password is None:    # address.as_admin's
            raise DataUnavailable(no_password('Redis', self.address))
        if self.mode == 'one':
            # No socket timeout: the reader waits for replies however idle
            # the site is, and each call has its own timer (Shared).
            self._client = Shared(
                lambda: Connection(socket_timeout=None, **self._options()),
                self.timeout)
        else:
            pool = redis.BlockingConnectionPool(
                connection_class=Connection, max_connections=self.max_size,
                timeout=self.timeout, socket_timeout=self.timeout,
                **self._options())
            self._client = redis.Redis(connection_pool=pool, retry=None)
        try:
            await self._check_library()
        except BaseException:
            await self.close()
            raise

    async def _check_library(self):
        """Load stickers.lua if Redis holds none or another version: the
        loader's account may, the app's may not (DataUnavailable)."""
        try:
            if await self._execute('FCALL_RO', 'stickers_version', 0) == VERSION:
                return
        except DataUnavailable as e:
            if 'Function not found' not in str(e):
                raise
        try:
            await self._execute('FUNCTION', 'LOAD', 'REPLACE', LIBRARY)
        except DataUnavailable as e:
            if not isinstance(e.__cause__, NoPermissionError):
                raise
            raise NotSetUp(
                'Redis at %s has not the functions of stickers.lua version %s,'
                ' and this account cannot load them (%s): start once with the '
                "loader's account" % (self, VERSION, e)) from e

    async def close(self):
        if self._client is not None:
            client, self._client = self._client, None
            if self.mode == 'one':
                await client.close()
            else:
                await client.aclose() if hasattr(client, 'aclose') \
                    else await client.close()
                await client.connection_pool.disconnect()

    async def _execute(self, *args):
        try:
            return await self._client.execute_command(*args) \
                if self.mode == 'pool' else await self._client.execute(*args)
        except UNAVAILABLE as e:
            raise DataUnavailable('Redis at %s: %s: %s' % (
                self, args[1] if args[0].startswith('FCALL') else args[0],
                e)) from e

    async def _call(self, name, args, keys=()):
        command = 'FCALL_RO' if name in READ_ONLY else 'FCALL'
        return await self._execute(command, name, len(keys), *keys,
                                   *[argument(a) for a in args])

    async def _admin(self, name, args):
        return await self._call(name, args, (ADMIN_KEY,))

    async def record_visits(self, visits):
        if visits:
            await self._call('record_visits',
                             [x for v in visits for x in v])

    async def expire(self):
        """In calls of EXPIRE_BATCH of each, by the limits Redis keeps."""
        return await batched(lambda n: self._call('expire', [n]))

    async def expire_below(self, session_ttl, max_sessions, max_ballots):
        """Loader only: the sweep with these limits, not Redis's (tests)."""
        return await batched(lambda n: self._admin('expire_below', [
            session_ttl, max_sessions, max_ballots, n]))

    async def forget_visitors(self):
        return await self.expire_below(0, 0, 0)

    async def configure(self, session_ttl, max_sessions=None,
                        max_ballots=None, keep=False, sweep_every=5.0):
        """Loader only: set the sweep's limits, the caps no more than fit
        Redis's maxmemory (with keep, only if none are set), and how often
        at most the app's sweep runs; returns (session_ttl, max_sessions,
        max_ballots)."""
        if keep:
            ttl, sessions, ballots, kept = await self._admin('limits', [])
            if kept:
                return ttl, sessions, ballots
        info = await self._execute('INFO', 'memory')
        found = re.search(r'^maxmemory:(\d+)', info, re.M)
        limits = caps(int(found.group(1)) if found else 0, max_sessions,
                      max_ballots)
        return tuple(await self._admin(
            'set_limits', [session_ttl] + list(limits) + [sweep_every]))[:3]

    async def load_batch(self, packs, stickers):
        args = [len(packs)]
        for p in packs:
            args.extend(p)
        for s in stickers:
            args.extend(s)
        return await self._admin('load_stickers', args)
