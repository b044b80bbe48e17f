"""aiohttp adapter: translates requests and responses for pages.Site."""
import asyncio

import aiohttp
from aiohttp import web, web_response

import edge
from pages import MAX_BODY, Request
from pages.http import NOSNIFF, SERVER
from pages.static import unrouted

# The Server header of every answer, aiohttp's own (400, 405, 413) too.
web_response.SERVER_SOFTWARE = SERVER


def _handler(page, waits=True):
    async def handle(request):
        try:
            body = await request.read() if request.body_exists else b''
        except ConnectionError:     # the client left, or edge timed it out
            raise web.HTTPRequestTimeout()
        # While a page waits, edge must not time its connection out.
        conn = edge.protocol_of(request.transport) if waits else edge.GONE
        conn.enter()
        try:
            r = await page(Request(
                request.method, request.path, request.cookies, request.remote,
                request.headers.get('User-Agent', ''), body),
                **request.match_info)
        finally:
            conn.leave()
        # Server: aiohttp adds SERVER_SOFTWARE itself.
        headers = [('Content-Type', r.content_type), NOSNIFF]
        headers.extend(r.headers)
        return web.Response(status=r.status, body=r.body, headers=headers)
    return handle


def make_app(site):
    app = web.Application(client_max_size=MAX_BODY)
    for route in site.routes():
        handler = _handler(route.handler, route.waits)
        if route.method == 'GET':     # and HEAD: aiohttp drops the body
            app.router.add_get(route.path, handler)
        else:
            app.router.add_route(route.method, route.path, handler)
    app.router.add_get('/{tail:.*}', _handler(unrouted(site), False))
    return app


class _Site(web.TCPSite):
    """TCPSite whose connections go through edge.Edge."""

    def __init__(self, runner, host, port, gate, **kwargs):
        super().__init__(runner, host, port, **kwargs)
        self._gate = gate

    async def start(self):
        await web.BaseSite.start(self)
        loop = asyncio.get_event_loop()
        self._server = await loop.create_server(
            self._gate.protocol(self._runner.server), self._host, self._port,
            backlog=self._backlog, reuse_address=self._reuse_address,
            reuse_port=self._gate.settings.reuse_port or None)
        self._bound_port = self._server.sockets[0].getsockname()[1]


# aiohttp 3.9+ takes the shutdown timeout on the runner; 3.8 (the last
# release for Python 3.7) on the site.
_ON_RUNNER = tuple(int(x) for x in aiohttp.__version__.split('.')[:2]) >= (3, 9)
_TIMEOUT = {'shutdown_timeout': 10.0}


async def serve(site, host, port, stopped, settings=edge.DEFAULTS):
    """Serve until the `stopped` event is set, then finish pending requests."""
    runner = web.AppRunner(make_app(site), access_log=None, handle_signals=False,
                           keepalive_timeout=settings.keepalive + 1,
                           **(_TIMEOUT if _ON_RUNNER else {}))
    await runner.setup()
    await _Site(runner, host, port, edge.Gate(settings), backlog=1024,
                **({} if _ON_RUNNER else _TIMEOUT)).start()
    try:
        await stopped.wait()
    finally:
        await runner.cleanup()
