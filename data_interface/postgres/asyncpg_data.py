"""DataInterface on PostgreSQL through asyncpg: every operation is one call
of a function of schema.sql, or one select of its view sticker_cards for the
ranked lists, over a pool of connections for one process (pool.py). asyncpg
prepares each statement once per connection and keeps it. Pages leave no
session state behind (no SET, LISTEN, cursors or session locks), so a
connection goes back to the pool as it is."""
import asyncio
from urllib.parse import urlsplit

import asyncpg

from .. import DataUnavailable, keep_alive
from ..address import check_listener
from .common import (  # noqa: F401 (RANKED, apply_schema: also from here)
    RANKED, SETTINGS, PostgresCalls, apply_schema, why)
from .pool import LOST, Pool

# What a stopped, restarting or overloaded server looks like to asyncpg:
# refused or timed-out connects, connections closed under a query (class 08),
# shutdown / starting up (class 57), too many connections (class 53).
UNAVAILABLE = (OSError, asyncio.TimeoutError, asyncpg.PostgresConnectionError,
               asyncpg.exceptions.OperatorInterventionError,
               asyncpg.exceptions.InsufficientResourcesError)
# What a page call may raise besides: any error of the server (an argument a
# function refuses, out of memory or disk, a bug) or of asyncpg (an argument
# it cannot encode, a closed pool). Pages validate what visitors send, so
# none of these is theirs: each is DataUnavailable (503), in _query.
FAILED = (asyncpg.PostgresError, asyncpg.InterfaceError)


async def can_connect(dsn, timeout=2.0):
    """True if the database at dsn accepts these credentials."""
    try:
        conn = await asyncpg.connect(dsn, timeout=timeout)
    except Exception:   # refused, not PostgreSQL, no such role...
        return False
    await conn.close()
    return True


async def connect(dsn, timeout):
    """One asyncpg connection, once the listener is checked. A silent
    link: a query gives up after `timeout`, asyncpg cancels it and the pool
    closes the connection if the server does not confirm within
    pool.CANCEL_WAIT; the others are tried, a new one opened."""
    u = urlsplit(dsn)
    check_listener(u.hostname, u.port or 5432)
    conn = await asyncpg.connect(dsn, timeout=timeout,
                                 command_timeout=timeout,
                                 server_settings=SETTINGS)
    keep_alive(conn._transport.get_extra_info('socket'))   # no option
    return conn


class PostgresData(PostgresCalls):
    """A pool of min_size..max_size connections; connects, acquires and
    queries give up after `timeout` seconds with DataUnavailable."""

    async def start(self):
        self._pool = Pool(self._connect, self.max_size)
        try:
            await self._pool.fill(self.min_size)
            if not self.replica:
                async with self._pool.acquire(self.timeout) as conn:
                    await apply_schema(conn)
        except BaseException as e:
            await self.close()
            if isinstance(e, UNAVAILABLE):
                raise DataUnavailable('cannot connect to PostgreSQL at %s: %s'
                                      % (self, why(e, self.timeout))) from e
            raise

    async def _connect(self):
        return await connect(self.dsn, self.timeout)

    async def close(self):
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

    def acquire(self):
        return self._pool.acquire(self.timeout)

    async def _query(self, method, query, *args):
        if self._pool is None:
            raise DataUnavailable('PostgreSQL at %s: not connected' % self)
        try:
            lease = self._pool.acquire(self.timeout)
            async with lease as conn:
                # pool.py decides whether the connection serves again; the
                # wait, the connect and the query share one timeout.
                return await getattr(conn, method)(query, *args,
                                                   timeout=lease.left())
        except UNAVAILABLE + FAILED + (LOST,) as e:
            raise DataUnavailable('PostgreSQL at %s: %s: %s' % (
                self, type(e).__name__, e)) from e
