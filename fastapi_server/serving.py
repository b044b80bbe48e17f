"""An ASGI application on uvicorn (httptools), each connection behind
edge.Edge, in the running loop, until an asyncio.Event is set."""
import asyncio
import contextlib
import logging
import socket

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

import edge
from pages.http import EVERY


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self):
        # server.py owns SIGINT and SIGTERM.
        yield


def listen(host, port, reuse_port=False, backlog=1024):
    """A listening socket (bound here, so that a busy port is an OSError
    and SO_REUSEPORT can be set)."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


TOO_LARGE = 'Request head larger than %d bytes' % edge.MAX_HEAD
REFUSED = ('HTTP/1.1 431 Request Header Fields Too Large\r\n%s'
           'Content-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n'
           'Connection: close\r\n\r\n%s') % (
    ''.join('%s: %s\r\n' % pair for pair in EVERY),
    len(TOO_LARGE), TOO_LARGE)


def _ignore(data):
    pass


class _Edge(edge.Edge):
    __slots__ = ()

    def head_too_large(self):
        # httptools takes heads of any size: refuse it here, and feed the
        # parser nothing more.
        self.inner.data_received = _ignore
        if not self.transport.is_closing():
            self.transport.write(REFUSED.encode('ascii'))
            self.transport.close()


def edge_protocol(gate):
    """uvicorn's httptools protocol behind an Edge; the request scope's
    state holds the Edge under 'edge' (for enter() and leave())."""
    def protocol(config, server_state, app_state, _loop=None):
        outer = _Edge(gate, None)
        outer.make_inner = lambda: HttpToolsProtocol(
            config, server_state, dict(app_state, edge=outer), _loop)
        return outer
    return protocol


async def serve_app(app, host, port, stopped, settings=edge.DEFAULTS):
    """Serve `app` until `stopped` is set, then finish pending requests."""
    # uvicorn warns once for each malformed or upgrade request: hostile
    # clients would flood the log. Its errors (a page that fails) still show.
    quiet = logging.getLogger('uvicorn.error')
    if not quiet.isEnabledFor(logging.DEBUG):
        quiet.setLevel(logging.ERROR)
    sock = listen(host, port, getattr(settings, 'reuse_port', False))
    config = uvicorn.Config(
        app, http=edge_protocol(edge.Gate(settings)), ws='none',
        lifespan='off', interface='asgi3', access_log=False, log_config=None,
        proxy_headers=False, server_header=False, headers=list(EVERY),
        # edge.Edge enforces the keep-alive limit; uvicorn's is a backstop.
        timeout_keep_alive=settings.keepalive + 1,
        timeout_graceful_shutdown=10, backlog=1024)
    server = _Server(config)

    async def stop():
        await stopped.wait()
        server.should_exit = True
    stopper = asyncio.ensure_future(stop())
    try:
        await server.serve(sockets=[sock])
    finally:
        stopper.cancel()
        sock.close()
