"""uvicorn adapter: the bare ASGI application (asgi_server) on uvicorn with
httptools, in server.py's running loop, behind edge.Edge."""
import asyncio
import socket

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

import edge
from asgi_server import make_app
from pages.http import EVERY


class _Http(HttpToolsProtocol):
    """uvicorn's protocol with a bound on a request head, which httptools
    does not have: beyond edge.MAX_HEAD, a 400 and the connection closes
    (edge's head timeout alone would let a fast client send gigabytes)."""

    def on_message_begin(self):
        self.head_size = 0
        super().on_message_begin()

    def on_url(self, url):
        self.head_size += len(url)
        if self.head_size > edge.MAX_HEAD:
            raise ValueError('request head too large')
        self.url += url

    def on_header(self, name, value):
        self.head_size += len(name) + len(value) + 4
        if self.head_size > edge.MAX_HEAD:
            raise ValueError('request head too large')
        super().on_header(name, value)


class _Edge(edge.Edge):
    """edge.Edge that asks uvicorn whether a page works for the connection
    (when its timer fires, or the cap needs room) instead of being told on
    every request: busy while uvicorn's last request is unanswered and its
    body is all here (a slow body still times out)."""
    __slots__ = ()

    @property
    def busy(self):
        cycle = getattr(self.inner, 'cycle', None)
        return (cycle is not None and not cycle.response_complete
                and self.phase == edge.IDLE)

    @busy.setter
    def busy(self, value):
        pass


def listen(host, port, reuse_port=False):
    """A bound listening TCP socket for host:port."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        sock.listen(1024)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


async def serve_app(app, host, port, stopped, settings=edge.DEFAULTS):
    """Serve the ASGI 3 `app` until `stopped` is set, then finish pending
    requests. server.py owns the loop and the signals, edge the limits;
    uvicorn adds Server and nosniff to every answer, its own 400s too."""
    gate = edge.Gate(settings)

    def protocol(**kwargs):
        return _Edge(gate, lambda: _Http(**kwargs))

    config = uvicorn.Config(
        app, http=protocol, interface='asgi3', lifespan='off', ws='none',
        access_log=False, log_config=None, proxy_headers=False,
        server_header=False, headers=list(EVERY), backlog=1024,
        # Its warnings are a line per malformed request.
        timeout_graceful_shutdown=10, log_level='error',
        # edge enforces it; uvicorn's own is only a backstop.
        timeout_keep_alive=int(settings.keepalive) + 1)
    config.load()
    server = uvicorn.Server(config)
    server.lifespan = config.lifespan_class(config)
    sock = listen(host, port, getattr(settings, 'reuse_port', False))
    try:
        await server.startup(sockets=[sock])
    except BaseException:
        sock.close()
        raise
    ticks = asyncio.ensure_future(server.main_loop())   # the Date header
    try:
        await stopped.wait()
    finally:
        server.should_exit = True
        await ticks
        await server.shutdown(sockets=[sock])


async def serve(site, host, port, stopped, settings=edge.DEFAULTS):
    """Serve the site until `stopped` is set, then finish pending requests."""
    await serve_app(make_app(site, settings, every=False), host, port,
                    stopped, settings)
