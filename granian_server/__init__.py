"""granian adapter: the bare ASGI application (asgi_server) on granian's
embedded server, whose Rust core hands requests to server.py's running loop
(asyncio or uvloop). Its core is not Python: edge.py cannot wrap it, so
granian's own limits stand in (see README)."""
import asyncio
import os
import socket

from granian.constants import HTTPModes, Interfaces
from granian.http import HTTP1Settings
from granian.server.embed import Server

from runtime import edge
from asgi_server import make_app
from pages import MAX_BODY
from runtime.processes import ESTABLISHED, LISTEN, tcp_socket_fds

# Room for a request head and a body at the limit in granian's read buffer.
BUFFER = MAX_BODY + 64 * 1024


def server_of(app, host, port, limits=edge.LIMITS,
              interface=Interfaces.ASGINL):
    """A granian embedded Server for `app`, an ASGI 3 application or one of
    granian's other `interface`s (granian_rsgi_server: RSGI), with the
    limits standing in for edge's."""
    return Server(
        app, address=host, port=port, interface=interface,
        http=HTTPModes.http1, websockets=False, backlog=1024,
        runtime_threads=1, log_enabled=False,
        # Connections at once: above it, new ones wait to be accepted.
        backpressure=edge.connection_cap(limits),
        # One timer for a request head, from the previous answer (or the
        # connection's start) on: idle connections close at it too.
        # pipeline_flush stays off: with it on, granian 2.8 drops its own
        # 400 answers (a non-UTF-8 path) and just closes.
        http1_settings=HTTP1Settings(
            header_read_timeout=max(1, int(
                min(limits.head, limits.keepalive) * 1000)),
            keep_alive=True, max_buffer_size=BUFFER))


async def limit_unread(port, seconds, serving):
    """Give granian's connections TCP_USER_TIMEOUT: the kernel resets one
    whose answers the client has not taken for `seconds` (a client that
    pipelines and never reads would otherwise hold a connection, and at the
    cap lock visitors out, for good: granian has no write timeout). Its core
    binds the socket itself, so the listening socket, whose option the
    connections inherit, is found among this process's descriptors once
    bound; the connections accepted before that get it too."""
    listening = []
    while not listening and not serving.done():
        await asyncio.sleep(0.005)
        listening = tcp_socket_fds(os.getpid(), port, LISTEN)
    value = max(1, int(seconds * 1000))
    for fds in (listening, None, None):
        for fd in fds or tcp_socket_fds(os.getpid(), port, ESTABLISHED):
            try:
                # A duplicate: the option is set on the shared socket.
                with socket.socket(fileno=os.dup(fd)) as sock:
                    sock.setsockopt(socket.IPPROTO_TCP,
                                    socket.TCP_USER_TIMEOUT, value)
            except OSError:     # closed meanwhile
                pass
        await asyncio.sleep(0.5)    # then those still in the accept queue


async def serve_app(app, host, port, stopped, limits=edge.LIMITS,
                    interface=Interfaces.ASGINL):
    """Serve `app` (see server_of) until `stopped` is set, then finish
    pending requests."""
    server = server_of(app, host, port, limits, interface)
    serving = asyncio.ensure_future(server.serve())
    waiting = asyncio.ensure_future(stopped.wait())
    limiting = asyncio.ensure_future(
        limit_unread(port, limits.keepalive, serving))
    try:
        await asyncio.wait([serving, waiting],
                           return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiting.cancel()
        limiting.cancel()
        if not serving.done():
            server.stop()
        try:
            await serving
        except RuntimeError as e:
            # granian's own errors (binding) come with a Rust backtrace.
            if '\nStack backtrace' not in str(e):
                raise
            raise RuntimeError(str(e).split('\n')[0]) from None


async def serve(site, host, port, stopped, limits=edge.LIMITS):
    """Serve the site until `stopped` is set, then finish pending requests."""
    await serve_app(make_app(site, limits), host, port, stopped, limits)
