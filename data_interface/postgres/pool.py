"""The connections of one process to PostgreSQL: at most `size`, opened
when first needed, handed out in the order callers came (a FifoGate), so a
caller past the gate always finds one. asyncpg's own pool makes a task for
every timed acquire and every release: about 35 µs of CPU per query here,
against a few µs for this one."""
import asyncio

import asyncpg

from .fifo import FifoGate


class Pool:
    """`async with pool.acquire(timeout) as conn`; `connect` is a coroutine
    function that opens one connection (with its own timeout)."""

    def __init__(self, connect, size):
        self._connect = connect
        self._gate = FifoGate(size)
        self._idle = []     # open connections not in use, last freed last
        self._all = set()   # open connections
        self._closed = False

    def acquire(self, timeout=None):
        return _Lease(self, timeout)

    async def fill(self, count):
        """Open connections now, until `count` (at most the size) are."""
        while len(self._all) < min(count, self._gate.size):
            conn = await self._connect()
            self._all.add(conn)
            self._idle.append(conn)

    async def close(self, timeout=5.0):
        """Close the idle connections, end those in use; later acquires
        raise InterfaceError."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in self._all - set(idle):
            conn.terminate()
        for conn in idle:
            try:
                await asyncio.wait_for(conn.close(), timeout)
            except Exception:
                conn.terminate()
        self._all.clear()

    async def _take(self):
        if self._closed:
            raise asyncpg.InterfaceError('the pool is closed')
        while self._idle:
            conn = self._idle.pop()
            if not conn.is_closed():
                return conn
            self._all.discard(conn)     # the server closed it meanwhile
        # Past the gate and none idle: fewer than `size` are open.
        conn = await self._connect()
        self._all.add(conn)
        return conn

    def _give_back(self, conn, exc):
        if exc is not None and not _reusable(conn, exc) or self._closed \
                or conn.is_closed():
            conn.terminate()
            self._all.discard(conn)
        else:
            self._idle.append(conn)


def _reusable(conn, exc):
    """After an error the server answered (a refused argument, say) the
    connection is as before; after any other (a timeout, a cancel, a lost
    socket) it may be mid-exchange, so it is closed."""
    return (isinstance(exc, asyncpg.PostgresError) and not conn.is_closed()
            and not conn.is_in_transaction())


class _Lease:
    __slots__ = ('pool', 'timeout', 'conn')

    def __init__(self, pool, timeout):
        self.pool, self.timeout, self.conn = pool, timeout, None

    async def __aenter__(self):
        gate = self.pool._gate
        await gate._wait(self.timeout)
        try:
            self.conn = await self.pool._take()
        except BaseException:
            gate._leave()
            raise
        return self.conn

    async def __aexit__(self, kind, exc, tb):
        self.pool._give_back(self.conn, exc)
        self.pool._gate._leave()
