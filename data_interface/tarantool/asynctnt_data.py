"""DataInterface on Tarantool through asynctnt: every operation is one call
of a stored procedure of app.lua."""
import asyncio

import asynctnt
from asynctnt.exceptions import TarantoolDatabaseError, TarantoolError
from asynctnt.iproto.protocol import Protocol

from .. import DataUnavailable
from .procedures import Procedures


# A call that Tarantool does not answer in time: asyncio.TimeoutError, which
# is an OSError only from Python 3.11 on.
UNAVAILABLE = (OSError, asyncio.TimeoutError, TarantoolError)
RECONNECT = 0.3     # seconds between reconnects of mode 'one'


class _Protocol(Protocol):
    made = None     # its transport

    def connection_made(self, transport):
        self.made = transport
        super().connection_made(transport)


class _Connection(asynctnt.Connection):
    """asynctnt.Connection whose connect, cut short by its timeout while it
    waits for the greeting, leaves no socket open (asynctnt's does): the
    next attempt or close() closes it."""
    attempt = None

    def protocol_factory(self, connected_fut, loop, cls=_Protocol):
        self._end_attempt()
        self.attempt = super().protocol_factory(connected_fut, loop, cls)
        return self.attempt

    def _end_attempt(self):
        if self.attempt is not None and self.attempt is not self._protocol \
                and self.attempt.made is not None:
            self.attempt.made.close()
        self.attempt = None

    def close(self):
        self._end_attempt()
        super().close()


class AsynctntData(Procedures):
    """mode 'one': one connection shared by all requests, reconnecting by
    itself (asynctnt's pings would not: a failed one is ignored, so they
    stay off; Procedures drops a silent link); mode 'multi': a connection
    opened and closed per operation."""

    async def _connect(self):
        a = self.address
        conn = _Connection(
            host=a.host, port=a.port, username=a.user, password=a.password,
            fetch_schema=False, auto_refetch_schema=False,
            connect_timeout=2.0, request_timeout=self.request_timeout,
            reconnect_timeout=0, ping_timeout=0)
        try:
            await conn.connect()
        except BaseException as e:  # cancelled too: no connection left
            # A link lost just after the login fails asynctnt's check of
            # the (now forgotten) version with a TypeError.
            lost = isinstance(e, UNAVAILABLE) or (
                isinstance(e, TypeError) and conn.version is None)
            conn.close()
            if not lost:
                raise
            why = 'the link was lost during the login' if isinstance(
                e, TypeError) else str(e) or type(e).__name__
            raise DataUnavailable('cannot connect to Tarantool at %s: %s' % (
                self.address, why)) from e
        # The first connect fails at once (with reconnects on, asynctnt
        # would retry it forever); once connected, mode 'one' reconnects.
        if self.mode == 'one':
            conn._reconnect_timeout = RECONNECT
        return conn

    async def _disconnect(self, conn):
        await conn.disconnect()

    def _transport(self, conn):
        return conn._transport    # asynctnt has no public one

    async def _send(self, conn, name, args):
        try:
            response = await conn.call(name, args)
        except UNAVAILABLE as e:
            # TarantoolDatabaseError too: see Procedures._send.
            if isinstance(e, TarantoolDatabaseError):
                self.replies += 1
            raise DataUnavailable('Tarantool: %s: %s' % (name, e)) from e
        self.replies += 1
        return response.body[0] if response.body else None
