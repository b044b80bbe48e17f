"""uvicorn adapter: the bare ASGI application (asgi_server) on uvicorn with
httptools, in server.py's running loop, behind edge.Edge."""
import asyncio

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from runtime import edge
from asgi_server import make_app
from pages.http import EVERY


class _Edge(edge.Edge):
    """edge.Edge that asks uvicorn whether a page works for the connection
    (when its timer fires, or the cap needs room) instead of being told on
    every request: busy while uvicorn's last request is unanswered and its
    body is all here (a slow body still times out), or before a head edge
    refused. httptools has no bound on a head: edge's MAX_HEAD is it."""
    __slots__ = ()

    @property
    def busy(self):
        cycle = getattr(self.inner, 'cycle', None)
        return (cycle is not None and not cycle.response_complete
                and self.phase in (edge.IDLE, edge.REFUSED))

    @busy.setter
    def busy(self, value):
        pass


async def serve_app(app, host, port, stopped, limits=edge.LIMITS):
    """Serve the ASGI 3 `app` until `stopped` is set, then finish pending
    requests. server.py owns the loop and the signals, edge the limits;
    uvicorn adds Server and nosniff to every answer, its own 400s too."""
    gate = edge.Gate(limits)

    def protocol(**kwargs):
        return _Edge(gate, lambda: HttpToolsProtocol(**kwargs))

    config = uvicorn.Config(
        app, http=protocol, interface='asgi3', lifespan='off', ws='none',
        access_log=False, log_config=None, proxy_headers=False,
        server_header=False, headers=list(EVERY), backlog=1024,
        # Its warnings are a line per malformed request.
        timeout_graceful_shutdown=10, log_level='error',
        # edge enforces it; uvicorn's own is only a backstop.
        timeout_keep_alive=int(limits.keepalive) + 1)
    config.load()
    server = uvicorn.Server(config)
    server.lifespan = config.lifespan_class(config)
    sock = edge.listening_socket(host, port, limits.reuse_port)
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


async def serve(site, host, port, stopped, limits=edge.LIMITS):
    """Serve the site until `stopped` is set, then finish pending requests."""
    await serve_app(make_app(site, limits, every=False), host, port,
                    stopped, limits)
