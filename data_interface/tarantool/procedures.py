"""The client of app.lua's stored procedures, shared by the Tarantool
drivers: every page operation is one call of one procedure, over one shared
connection (mode 'one') or a connection per call (mode 'multi'). A driver
adds _connect, _disconnect, _send (which counts the replies it gets) and
_transport."""
import abc
import asyncio

from .. import DataUnavailable, FunctionCalls, keep_alive
from ..address import no_password


class Procedures(FunctionCalls):
    sweeps_itself = True    # app.lua's expiry fiber
    # Seconds a call waits for its answer. Mode 'one': a call that waited
    # this long while the connection answered nothing at all (a dead link
    # no reset announced, where each call would time out and the link be
    # kept) drops it, and the driver connects anew. A long call (the
    # loader's) answered in time keeps the link.
    request_timeout = 10.0

    def __init__(self, address, mode='one'):
        if mode not in ('one', 'multi'):
            raise ValueError('mode must be one or multi, not %r' % mode)
        self.address = address
        self.mode = mode
        self._conn = None
        self.replies = 0        # that _send got, answers and errors alike
        self._watch = None

    @abc.abstractmethod
    async def _connect(self):
        """A new connection, or DataUnavailable."""

    @abc.abstractmethod
    async def _disconnect(self, conn):
        """Close a connection of _connect."""

    @abc.abstractmethod
    async def _send(self, conn, name, args):
        """The first value the procedure returns (None for none).
        DataUnavailable when Tarantool cannot be reached or the call fails
        there (out of memory, a refused argument, no privilege): pages
        validate what visitors send, so no failure there is theirs."""

    @abc.abstractmethod
    def _transport(self, conn):
        """The asyncio transport of `conn` (None while not connected)."""

    async def _shared(self):
        """The connection of mode 'one' (a driver may open it again)."""
        return self._conn

    async def start(self):
        if self.address.password is None:    # address.as_admin's
            raise DataUnavailable(no_password('Tarantool', self.address))
        conn = await self._connect()
        if self.mode == 'one':
            self._conn = conn
            self._watch = asyncio.ensure_future(self._watch_link())
        else:
            await self._disconnect(conn)

    async def _watch_link(self):
        """Keepalive on each new socket of the shared connection."""
        seen = None
        while True:
            await asyncio.sleep(1.0)
            transport = self._transport(self._conn) if self._conn else None
            if transport is not seen and transport is not None:
                seen = transport
                keep_alive(transport.get_extra_info('socket'))

    async def close(self):
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await self._disconnect(conn)

    async def _call(self, name, args):
        if self.mode == 'one':
            conn = await self._shared()
            transport = self._transport(conn)
            if transport is not None and transport.is_closing():
                # Lost, the driver not told yet: a write would go nowhere,
                # and asyncio logs each one past the fifth.
                raise DataUnavailable('Tarantool: %s: the connection was '
                                      'lost' % name)
            replies = self.replies
            try:
                return await self._send(conn, name, args)
            except DataUnavailable as e:
                transport = self._transport(conn)
                if isinstance(e.__cause__, asyncio.TimeoutError) and \
                        self.replies == replies and transport is not None:
                    transport.abort()   # the driver sees a lost connection
                raise
        conn = await self._connect()
        try:
            return await self._send(conn, name, args)
        finally:
            await self._disconnect(conn)

    async def record_visits(self, visits):
        await self._call('record_visits', [[list(v) for v in visits]])

    async def expire(self):
        # app.lua's fiber sweeps; the app's account may not call expire.
        raise NotImplementedError('Tarantool sweeps by itself')

    async def forget_visitors(self):
        # app.lua's sweep with no idle time and caps of 0.
        return tuple(await self._call('expire', [0, 0, 0]))

    async def load_batch(self, packs, stickers):
        return await self._call('load_stickers', [packs, stickers])

    async def position(self):
        """How far this instance has come in the primary's log."""
        return await self._call('replication_position', [])

    async def storage_engine(self):
        """'memtx' or 'vinyl': where the site's spaces are (the loader's
        account only)."""
        return await self._call('storage_engine', [])
