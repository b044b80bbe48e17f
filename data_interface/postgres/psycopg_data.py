"""DataInterface on PostgreSQL through psycopg 3 (CPython 3.10+): the same
statements as asyncpg_data (common.py) over a psycopg_pool
AsyncConnectionPool for one process, in autocommit as asyncpg runs.

Prepared statements: each page call is one statement of a fixed few, so
with `prepare` (the default) each is prepared on a connection at its first
use (prepare=True) and then costs PostgreSQL no parse or plan; without it
none is (prepare_threshold None). Pipeline mode is not used: it saves the
round trips between the statements of one batch, and a page sends one
statement, whose single round trip it would only wrap in a sync more."""
import asyncio
import functools
import logging
import os
import re
import select
import socket
import time
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

import psycopg
from psycopg.adapt import AdaptersMap
from psycopg.types.composite import CompositeInfo, register_composite
from psycopg_pool import AsyncConnectionPool

from .. import DataUnavailable, Sticker, keep_alive
from ..address import check_listener
from .common import SETTINGS, PostgresCalls, apply_schema, why

# How long a caller waits for a connection while the last attempt to open
# one failed, or the server closed one (stopped, restarting, refusing):
# the attempt it starts may succeed at once; else DataUnavailable now, not
# after `timeout`.
DOWN_WAIT = 0.25
# A connection slot the pool could not reopen for this long is given up,
# and the next caller starts a new attempt at once: after an outage the
# pool is back within this, not psycopg_pool's backoff of minutes.
RECONNECT = 2.0
OPTIONS = ' '.join('-c %s=%s' % item for item in sorted(SETTINGS.items()))
# Everything psycopg and psycopg_pool raise (PoolTimeout and PoolClosed are
# OperationalErrors), the refusal of check_listener, and a timed-out query.
FAILED = (psycopg.Error, OSError, asyncio.TimeoutError)
# Errors only, as server.py has asynctnt and asyncpg: the pool logs each
# failed attempt to connect, psycopg each cancel a stalled server left
# unanswered; pages.outage reports an outage in a few lines.
logging.getLogger('psycopg').setLevel(logging.ERROR)

_PLACEHOLDER = re.compile(r'\$(\d+)')


@functools.lru_cache(maxsize=256)
def _converted(sql):
    """asyncpg's '$1' placeholders as psycopg's '%s': (sql, the order of
    the arguments, or None for 1, 2, ...)."""
    order = tuple(int(n) - 1 for n in _PLACEHOLDER.findall(sql))
    return (_PLACEHOLDER.sub('%s', sql.replace('%', '%%')),
            None if order == tuple(range(len(order))) else order)


async def run(conn, kind, sql, args, prepare=False):
    """One statement of common.py's kinds on a psycopg connection."""
    if args:
        sql, order = _converted(sql)
        if order is not None:
            args = [args[i] for i in order]
    else:
        args = None   # nothing to convert: '%' stays as it is
    cur = await conn.execute(sql, args, prepare=prepare)
    if kind == 'fetch':
        return await cur.fetchall()
    if kind == 'execute':
        return cur.statusmessage
    row = await cur.fetchone()
    return row if kind == 'fetchrow' or row is None else row[0]


class Session:
    """A psycopg connection with the asyncpg methods common.apply_schema
    and the tests use."""

    def __init__(self, conn):
        self.conn = conn

    def transaction(self):
        return self.conn.transaction()

    async def execute(self, sql, *args, timeout=None):
        return await asyncio.wait_for(
            run(self.conn, 'execute', sql, args), timeout)

    async def fetch(self, sql, *args):
        return await run(self.conn, 'fetch', sql, args)

    async def fetchrow(self, sql, *args):
        return await run(self.conn, 'fetchrow', sql, args)

    async def fetchval(self, sql, *args):
        return await run(self.conn, 'fetchval', sql, args)


def _broken(conn):
    """Whether the server closed this idle connection (stopped, or ended
    its backend): what an idle connection receives is its last word (a
    FATAL error, then the end), or else rare news (a setting reloaded),
    for which a new connection costs little."""
    pgconn = conn.pgconn
    return (pgconn.status != psycopg.pq.ConnStatus.OK
            or bool(select.select([pgconn.socket], [], [], 0)[0]))


def _wake(waiter, _=None):
    if not waiter.done():
        waiter.set_result(None)


class _Connection(psycopg.AsyncConnection):
    """The pool's connections: each checks the listener first, turns TCP
    keepalive on and tells `data` (set on a subclass per PsycopgData) how
    connecting went."""
    data = None

    @classmethod
    async def connect(cls, conninfo='', **kwargs):
        data = cls.data
        try:
            u = urlsplit(data.dsn)
            check_listener(u.hostname, u.port or 5432)
            conn = await super().connect(conninfo, **kwargs)
        except BaseException as e:
            data._down = e
            raise
        fd = os.dup(conn.pgconn.socket)
        with socket.socket(fileno=fd) as sock:
            keep_alive(sock)
        data._down = None
        return conn


class PsycopgData(PostgresCalls):
    """A pool of min_size..max_size connections; connects, acquires and
    queries give up after `timeout` seconds with DataUnavailable."""

    def __init__(self, dsn, min_size=4, max_size=16, timeout=3.0,
                 replica=False, prepare=True):
        super().__init__(dsn, min_size, max_size, timeout, replica)
        self.prepare = prepare
        self._adapters = AdaptersMap(psycopg.adapters)
        self._down = None   # why the last connect failed, if it did
        self._settling = set()   # tasks awaiting the end of a query

    def _connect_args(self):
        return dict(
            autocommit=True, context=self._adapters,
            prepare_threshold=5 if self.prepare else None,
            connect_timeout=max(2, round(self.timeout)), options=OPTIONS)

    async def start(self):
        conn_class = type('Connection', (_Connection,), {'data': self})
        try:
            # One connection first: the schema, then the row type of
            # sticker_cards, which pack_stickers returns an array of.
            conn = await asyncio.wait_for(conn_class.connect(
                self.dsn, **self._connect_args()), self.timeout)
            try:
                if not self.replica:
                    await apply_schema(Session(conn))
                info = await CompositeInfo.fetch(conn, 'sticker_cards')
            finally:
                await conn.close()
            register_composite(info, self._adapters, Sticker)
            # No `check` (a round trip per getconn: _broken looks instead);
            # max_waiting 0: callers queue in order, each for `timeout` at
            # most, as with asyncpg's pool; getconn's timeout: _getconn's.
            self._pool = AsyncConnectionPool(
                self.dsn, connection_class=conn_class,
                kwargs=self._connect_args(), min_size=self.min_size,
                max_size=self.max_size, open=False, timeout=self.timeout,
                reconnect_timeout=RECONNECT, name=str(self))
            await self._pool.open(wait=True, timeout=self.timeout)
        except BaseException as e:
            await self.close()
            if isinstance(e, FAILED):
                raise DataUnavailable('cannot connect to PostgreSQL at %s: %s'
                                      % (self, why(self._down or e,
                                                   self.timeout))) from e
            raise

    async def close(self):
        for task in list(self._settling):
            task.cancel()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

    @asynccontextmanager
    async def acquire(self):
        async with self._pool.connection(self.timeout) as conn:
            yield Session(conn)

    async def _getconn(self, deadline):
        """A connection of the pool that the server did not close."""
        while True:
            wait = deadline - time.monotonic()
            if self._down is not None:
                wait = min(wait, DOWN_WAIT)
            if wait <= 0:
                raise asyncio.TimeoutError()
            conn = await self._pool.getconn(wait)
            if not _broken(conn):
                return conn
            # The server may be gone: wait no longer than while it is.
            self._down = 'a connection closed by the server'
            await conn.close()
            await self._pool.putconn(conn)   # the pool opens another

    async def _query(self, kind, sql, *args):
        deadline = time.monotonic() + self.timeout
        try:
            if self._pool is None:
                raise psycopg.InterfaceError('not started, or closed')
            conn = await self._getconn(deadline)
            # The statement runs in a task of its own, so that a caller
            # timed out or cancelled leaves at once: psycopg then cancels
            # the query and may wait up to 10 s for the server to confirm
            # it (a stalled one does not), in _settle, before the
            # connection goes back to the pool (closed if not confirmed).
            loop = asyncio.get_running_loop()
            task = loop.create_task(run(conn, kind, sql, args, self.prepare))
            waiter = loop.create_future()   # lighter than asyncio.wait
            task.add_done_callback(functools.partial(_wake, waiter))
            timer = loop.call_later(deadline - time.monotonic(), _wake, waiter)
            try:
                await waiter
            except BaseException:
                self._settle(task, conn)
                raise
            finally:
                timer.cancel()
            if not task.done():
                self._settle(task, conn)
                raise asyncio.TimeoutError('no answer in %s s' % self.timeout)
            await self._pool.putconn(conn)
            result = task.result()
            self._down = None   # it answers
            return result
        except FAILED as e:
            raise DataUnavailable('PostgreSQL at %s: %s: %s' % (
                self, type(e).__name__, e)) from e

    def _settle(self, task, conn):
        task.cancel()
        settling = asyncio.ensure_future(self._give_back(task, conn))
        self._settling.add(settling)
        settling.add_done_callback(self._settling.discard)

    async def _give_back(self, task, conn):
        try:
            await asyncio.wait((task,))
            if not task.cancelled():
                task.exception()   # retrieved: it was the caller's to see
        finally:
            pool = self._pool
            if pool is not None:
                await pool.putconn(conn)
            else:
                await conn.close()
