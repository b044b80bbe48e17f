"""aiohttp adapter: translates requests and responses for pages.Site."""
import asyncio
import logging

import aiohttp
from aiohttp import http_exceptions, web, web_response

from runtime import edge
from pages import MAX_BODY
from pages.http import NOSNIFF, SERVER, cookies_of, new_request
from pages.static import unrouted

# The Server header of every answer, aiohttp's own (400, 405, 413) too.
web_response.SERVER_SOFTWARE = SERVER
NO_COOKIES = {}     # shared: pages only read cookies
# id(Response) -> (Response, its headers): see _headers.
HEADERS = {}


class _Lazy:
    """A pages.http.Request whose fields are read from aiohttp's request
    only when a page reads them: /ugly and /about read none. For pages that
    never wait, on requests without a body."""
    __slots__ = ('r',)

    def __init__(self, request):
        self.r = request

    method = property(lambda self: self.r.method)
    path = property(lambda self: self.r.path)
    cookies = property(lambda self: _cookies(self.r))
    ip = property(lambda self: self.r.remote)
    user_agent = property(lambda self: self.r.headers.get('User-Agent', ''))
    body = b''
    forwarded = property(lambda self: self.r.headers.get('X-Forwarded-For', ''))


def _cookies(request):
    header = request.headers.get('Cookie')
    return cookies_of(header) if header else NO_COOKIES


def _headers(r):
    """The headers of an answer to r (a pages Response), made once for the
    Responses the pages answer many requests with (/ugly, /about)."""
    found = HEADERS.get(id(r))
    if found is None or found[0] is not r:
        if len(HEADERS) >= 64:
            HEADERS.clear()
        found = HEADERS[id(r)] = (r, (('Content-Type', r.content_type), NOSNIFF)
                                  + tuple(r.headers))
    return found[1]


def _handler(page, waits=True):
    async def handle(request):
        if not waits and not request.body_exists:
            r = await page(_Lazy(request), **request.match_info)
            return web.Response(status=r.status, body=r.body,
                                headers=_headers(r))
        try:
            body = await request.read() if request.body_exists else b''
        except ConnectionError:     # the client left, or edge timed it out
            raise web.HTTPRequestTimeout()
        # While a page waits, edge must not time its connection out.
        conn = edge.protocol_of(request.transport) if waits else edge.GONE
        conn.enter()
        try:
            headers = request.headers
            r = await page(new_request((
                request.method, request.path, _cookies(request), request.remote,
                headers.get('User-Agent', ''), body,
                headers.get('X-Forwarded-For', ''))),
                **request.match_info)
        finally:
            conn.leave()
        # Server: aiohttp adds SERVER_SOFTWARE itself.
        return web.Response(status=r.status, body=r.body, headers=_headers(r))
    return handle


def _not_bad_requests(record):
    """aiohttp logs each malformed request with its traceback; the client
    has its 400, the log needs no line per hostile request."""
    exc = record.exc_info[1] if record.exc_info else None
    return not isinstance(exc, http_exceptions.HttpProcessingError)


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


# aiohttp 3.9+ takes the shutdown timeout on the runner; 3.8 (the last
# release for Python 3.7) on the site, which is not used here.
_ON_RUNNER = tuple(int(x) for x in aiohttp.__version__.split('.')[:2]) >= (3, 9)
SHUTDOWN_TIMEOUT = 10.0


async def serve(site, host, port, stopped, limits=edge.LIMITS):
    """Serve until the `stopped` event is set, then finish pending requests."""
    runner = web.AppRunner(
        make_app(site), access_log=None, handle_signals=False,
        keepalive_timeout=limits.keepalive + 1,
        **({'shutdown_timeout': SHUTDOWN_TIMEOUT} if _ON_RUNNER else {}))
    await runner.setup()
    logging.getLogger('aiohttp.server').addFilter(_not_bad_requests)
    # A listener of our own rather than a TCPSite: its connections go
    # through edge.Edge.
    listener = await asyncio.get_event_loop().create_server(
        edge.Gate(limits).protocol(runner.server), host, port, backlog=1024,
        reuse_port=limits.reuse_port or None)
    try:
        await stopped.wait()
    finally:
        listener.close()
        await runner.server.shutdown(SHUTDOWN_TIMEOUT)
        await runner.cleanup()
