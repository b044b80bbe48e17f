"""The client of app.lua's stored procedures, shared by the Tarantool
drivers: every page operation is one call of one procedure, over one shared
connection (mode 'one') or a connection per call (mode 'multi'). A driver
adds _connect, _disconnect and _send."""
import abc

from .. import FunctionCalls


class Procedures(FunctionCalls):
    sweeps_itself = True    # app.lua's expiry fiber

    def __init__(self, address, mode='one'):
        if mode not in ('one', 'multi'):
            raise ValueError('mode must be one or multi, not %r' % mode)
        self.address = address
        self.mode = mode
        self._conn = None

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

    async def _shared(self):
        """The connection of mode 'one' (a driver may open it again)."""
        return self._conn

    async def start(self):
        conn = await self._connect()
        if self.mode == 'one':
            self._conn = conn
        else:
            await self._disconnect(conn)

    async def close(self):
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await self._disconnect(conn)

    async def _call(self, name, args):
        if self.mode == 'one':
            return await self._send(await self._shared(), name, args)
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

    async def load_batch(self, packs, stickers):
        return await self._call('load_stickers', [packs, stickers])

    async def position(self):
        """How far this instance has come in the primary's log."""
        return await self._call('replication_position', [])

    async def storage_engine(self):
        """'memtx' or 'vinyl': where the site's spaces are (the loader's
        account only)."""
        return await self._call('storage_engine', [])
