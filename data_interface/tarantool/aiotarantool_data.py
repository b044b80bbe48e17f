"""DataInterface on Tarantool through aiotarantool, the driver of the 2017
benchmark (Python 3.7 only): the same stored procedures of app.lua
as asynctnt_data, the same modes."""
import asyncio
import ctypes
import ctypes.util
import functools

import aiotarantool
import tarantool.connection
from tarantool.error import DatabaseError, NetworkError
from tarantool.request import RequestCall

from .. import DataUnavailable
from .procedures import Procedures

CONNECT_TIMEOUT = 2.0


class _Ctypes:
    """ctypes as tarantool 0.5's connection sees it, with libc looked up
    once: it looks it up for each new connection, and find_library runs
    ldconfig in a subprocess (3 ms with the loop standing still, far more
    on a busy machine)."""
    util = type('util', (), {'find_library': staticmethod(
        functools.lru_cache(None)(ctypes.util.find_library))})

    def __getattr__(self, name):
        return getattr(ctypes, name)


tarantool.connection.ctypes = _Ctypes()


class _Call(RequestCall):
    """CALL with the return values of Tarantool 1.7+, as asynctnt sends it
    (tarantool 0.5 sends the 1.6 CALL, which wraps them in tuples)."""
    request_type = 0x0a


class _Connection(aiotarantool.Connection):
    """aiotarantool.Connection that survives losing the server: its reader
    fails on the stream it has just closed or dies on a reset without
    failing the waiting calls, its close sets results on waiters that were
    cancelled and also ends a connect cut short."""

    async def _response_reader(self):
        try:
            await super()._response_reader()
        except Exception as e:      # CancelledError too, on Python 3.7
            if self.connected:
                await self._do_close(NetworkError(e))
        # The reader ends when the connection closes, and the close cancels it.
        raise asyncio.CancelledError()

    async def _do_close(self, exc):
        for sync, waiter in list(self._waiters.items()):
            if waiter.done():
                del self._waiters[sync]
        await super()._do_close(exc)

    async def close(self):
        if not self.connected and self._reader_task is not None:
            # A connect cut short (by its timeout): not `connected` yet, but
            # its socket, reader and writer are open.
            self._reader_task.cancel()
            self._writer_task.cancel()
            self._writer.transport.close()
            self._reader_task = self._writer_task = None
            self._waiters = {}
        await super().close()


def _why(e):
    return str(e) or type(e).__name__


class AiotarantoolData(Procedures):
    """mode 'one': one connection shared by all requests, opened again on the
    next call after a loss; mode 'multi': a connection per operation."""

    async def _connect(self):
        a = self.address
        conn = _Connection(a.host, a.port, user=a.user, password=a.password,
                           loop=asyncio.get_event_loop())
        try:
            await asyncio.wait_for(conn.connect(), CONNECT_TIMEOUT)
        except (OSError, asyncio.TimeoutError, DatabaseError,
                AssertionError) as e:     # AssertionError: no greeting
            await conn.close()
            raise DataUnavailable('cannot connect to Tarantool at %s: %s'
                                  % (self.address, _why(e))) from e
        return conn

    async def _disconnect(self, conn):
        await conn.close()

    async def start(self):
        self._reconnecting = asyncio.Lock()
        await super().start()

    async def _shared(self):
        """The connection of mode 'one', opened again if it was lost."""
        if self._conn is None or not self._conn.connected:
            async with self._reconnecting:
                if self._conn is None or not self._conn.connected:
                    await self.close()
                    self._conn = await self._connect()
        return self._conn

    def _transport(self, conn):
        return conn._writer.transport if conn._writer else None

    async def _send(self, conn, name, args):
        try:
            response = await asyncio.wait_for(
                conn._send_request(_Call(conn, name, args)),
                self.request_timeout)
        except (DatabaseError, OSError, asyncio.TimeoutError) as e:
            # NetworkError and errors raised by the call: see
            # Procedures._send.
            if isinstance(e, DatabaseError) and \
                    not isinstance(e, NetworkError):
                self.replies += 1
            raise DataUnavailable('Tarantool: %s: %s' % (name, _why(e))) from e
        self.replies += 1
        return response[0] if len(response) else None
