"""DataInterface on Tarantool through asynctnt: every operation is one call
of a stored function of app.lua."""
import asynctnt
from asynctnt.exceptions import TarantoolError

from .. import DataUnavailable
from .functions import AppFunctions


class TarantoolData(AppFunctions):
    """mode 'one': one connection shared by all requests, reconnecting by
    itself; mode 'multi': a connection opened and closed per operation."""

    def __init__(self, address, mode='one'):
        if mode not in ('one', 'multi'):
            raise ValueError('mode must be one or multi, not %r' % mode)
        self.address = address
        self.mode = mode
        self._conn = None

    def _connection(self):
        a = self.address
        return asynctnt.Connection(
            host=a.host, port=a.port, username=a.user, password=a.password,
            fetch_schema=False, auto_refetch_schema=False,
            connect_timeout=2.0, request_timeout=10.0,
            reconnect_timeout=0.3 if self.mode == 'one' else 0,
            ping_timeout=0)

    async def start(self):
        conn = self._connection()
        try:
            await conn.connect()
        except (OSError, TarantoolError) as e:
            raise DataUnavailable('cannot connect to Tarantool at %s: %s'
                                  % (self.address, e)) from e
        if self.mode == 'one':
            self._conn = conn
        else:
            await conn.disconnect()

    async def close(self):
        if self._conn is not None:
            await self._conn.disconnect()
            self._conn = None

    async def _call(self, name, args):
        try:
            if self.mode == 'one':
                response = await self._conn.call(name, args)
            else:
                conn = self._connection()
                await conn.connect()
                try:
                    response = await conn.call(name, args)
                finally:
                    await conn.disconnect()
        except (OSError, TarantoolError) as e:
            # TarantoolDatabaseError too: see AppFunctions._call.
            raise DataUnavailable('Tarantool: %s: %s' % (name, e)) from e
        return response.body[0] if response.body else None
