"""psycopg connections for Django's pool whose every wait on the server
ends by the deadline of the call it serves (DEADLINE, which data.py sets
and asgiref carries into its thread with the context). Past it the
connection is closed, so the thread that waited is free at once and the
pool drops the connection: a frozen server or a silent link holds no
thread longer than the call's timeout. TCP keepalive finds a dead peer of
an idle connection."""
import contextvars
import os
import socket
import time

import psycopg
from psycopg import errors

from .. import keep_alive

# time.monotonic() by which the call running in this context must end, or
# None (Django's own waits, the pool's: psycopg's, unbounded).
DEADLINE = contextvars.ContextVar('deadline', default=None)


class Connection(psycopg.Connection):

    @classmethod
    def connect(cls, conninfo='', **kwargs):
        conn = super().connect(conninfo, **kwargs)
        with socket.socket(fileno=os.dup(conn.pgconn.socket)) as sock:
            keep_alive(sock)
        return conn

    def wait(self, gen, *args, **kwargs):
        deadline = DEADLINE.get()
        if deadline is None or kwargs.get('timeout') is not None:
            return super().wait(gen, *args, **kwargs)
        kwargs['timeout'] = max(0.0, deadline - time.monotonic())
        try:
            return super().wait(gen, *args, **kwargs)
        except errors._WaitTimeout:
            self.close()    # mid-statement: of no further use
            raise psycopg.OperationalError(
                'no answer from the server in time') from None
