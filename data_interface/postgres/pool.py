"""The connections of one process to PostgreSQL: at most `size`, opened
when first needed, handed out in the order callers came (a FifoGate), so a
caller past the gate always finds one. asyncpg's own pool makes a task for
every timed acquire and every release: about 35 µs of CPU per query here,
against a few µs for this one."""
import asyncio

import asyncpg

from .fifo import FifoGate

# How long a connection may take to confirm a cancelled query before it is
# closed instead.
CANCEL_WAIT = 5.0
# asyncpg's error for a connection that lost track of its exchange (the
# server dropped it mid-way): it is closed, not reused. Other errors leave a
# connection as it was: an error the server answered, an argument asyncpg
# could not encode, a task cancelled before or after its query.
LOST = asyncpg.exceptions.InternalClientError


class Pool:
    """`async with pool.acquire(timeout) as conn`; `connect` is a coroutine
    function that opens one connection (with its own timeout)."""

    def __init__(self, connect, size):
        self._connect = connect
        self._gate = FifoGate(size)
        self._idle = []     # open connections not in use, last freed last
        self._all = set()   # open connections
        self._settling = set()   # tasks awaiting a cancel's end
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
        for task in list(self._settling):
            task.cancel()
        idle, self._idle = self._idle, []
        for conn in self._all - set(idle):
            conn.terminate()
        for conn in idle:
            try:
                await asyncio.wait_for(conn.close(), timeout)
            except Exception:
                conn.terminate()
        self._all.clear()

    async def _take(self, left=None):
        if self._closed:
            raise asyncpg.InterfaceError('the pool is closed')
        while self._idle:
            conn = self._idle.pop()
            if not conn.is_closed():
                return conn
            self._all.discard(conn)     # the server closed it meanwhile
        # Past the gate and none idle: fewer than `size` are open; the
        # connect gets what is left of the caller's time.
        conn = await (self._connect() if left is None else
                      asyncio.wait_for(self._connect(), left))
        self._all.add(conn)
        return conn

    def _give_back(self, conn, exc):
        """Take `conn` back after its use ended with `exc` (or None), and
        free its place at the gate: at once, or once PostgreSQL confirmed
        the cancel of its query."""
        if _cancelling(conn):
            task = asyncio.ensure_future(self._after_cancel(conn))
            self._settling.add(task)
            task.add_done_callback(self._settling.discard)
            return
        self._keep(conn, not isinstance(exc, LOST)
                   and not conn.is_in_transaction())
        self._gate.leave()

    async def _after_cancel(self, conn):
        # A timeout or a cancelled caller: asyncpg asks the server to
        # cancel the query; the connection serves again once it has.
        try:
            await asyncio.wait_for(
                conn._protocol._wait_for_cancellation(), CANCEL_WAIT)
            ok = not conn.is_in_transaction()
        except Exception:
            ok = False
        self._keep(conn, ok)
        self._gate.leave()

    def _keep(self, conn, ok):
        if ok and not self._closed and not conn.is_closed():
            self._idle.append(conn)
        else:
            conn.terminate()
            self._all.discard(conn)


def _cancelling(conn):
    """Whether asyncpg is cancelling the query of `conn` (a private part
    of asyncpg, which its own pool uses the same way)."""
    is_cancelling = getattr(conn._protocol, '_is_cancelling', None)
    return (is_cancelling is not None and not conn.is_closed()
            and is_cancelling())


class _Lease:
    """A connection for one call: the wait at the gate, the connect and
    the call itself (`left()` for its timeout) all within `timeout`."""
    __slots__ = ('pool', 'timeout', 'conn', 'deadline')

    def __init__(self, pool, timeout):
        self.pool, self.timeout, self.conn = pool, timeout, None
        self.deadline = None

    def left(self):
        """Seconds left of the lease's timeout (None: no timeout)."""
        if self.deadline is None:
            return None
        return max(0.001, self.deadline - asyncio.get_event_loop().time())

    async def __aenter__(self):
        gate = self.pool._gate
        if self.timeout is not None:
            self.deadline = asyncio.get_event_loop().time() + self.timeout
        await gate.wait(self.timeout)
        try:
            self.conn = await self.pool._take(self.left())
        except BaseException:
            gate.leave()
            raise
        return self.conn

    async def __aexit__(self, kind, exc, tb):
        self.pool._give_back(self.conn, exc)
