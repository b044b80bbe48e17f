"""The site's Tarantool procedures through the synchronous `tarantool`
connector (0.5, the 2017 benchmark's select-sync; legacy environment
only): a DataInterface whose coroutines never wait, because each call
blocks on its socket. A framework's synchronous handler runs them to the
end at once."""
import tarantool
from tarantool.error import DatabaseError, NetworkError

from data_interface import DataUnavailable
from data_interface.tarantool.procedures import Procedures
# CALL with Tarantool 1.7+ results, as the aiotarantool driver sends it.
from data_interface.tarantool.aiotarantool_data import _Call


class BlockingTarantool(Procedures):
    """Mode 'one' only: one blocking connection."""

    async def _connect(self):
        a = self.address
        try:
            return tarantool.Connection(a.host, a.port, user=a.user,
                                        password=a.password,
                                        socket_timeout=10)
        except (DatabaseError, NetworkError, OSError) as e:
            raise DataUnavailable('cannot connect to Tarantool at %s: %s'
                                  % (a, e)) from e

    async def _disconnect(self, conn):
        conn.close()

    async def _send(self, conn, name, args):
        try:
            response = conn._send_request(_Call(conn, name, args))
        except (DatabaseError, NetworkError, OSError) as e:
            raise DataUnavailable('Tarantool: %s: %s' % (name, e)) from e
        return response[0] if len(response) else None

    def _transport(self, conn):
        return None     # a blocking socket, no asyncio transport to watch
