"""japronto adapter: translates requests and responses for pages.Site.

japronto serves here on the engine's event loop (asyncio or uvloop): its
app.run() would fork a worker with a uvloop loop of its own and its own
signal handling, so serve() does what that worker does, on this loop.
pipeline.py keeps japronto's request pipeline within what it survives.
"""
import asyncio

from japronto import Application
from japronto.protocol.cprotocol import Protocol
from japronto.router import RouteNotFoundException

from pages import MAX_BODY, ROUTES, SESSION_COOKIE, Request
from pages.static import static_page
from .pipeline import Connection, Refused, drain, feed_later

# Pages that never wait: their handlers are plain functions, which japronto
# answers at once, so pipelined requests for them go through in batches.
AT_ONCE = ('ugly', 'about')
# Unrouted GETs (static files, 404) are answered at once too.
AT_ONCE_PREFIXES = (b'GET /static/', b'GET /img/', b'GET /favicon.ico ')


def _request(request):
    return Request(request.method, request.path,
                   request.cookies.get(SESSION_COOKIE), request.remote_addr,
                   request.headers.get('User-Agent', ''), request.body or b'')


def _response(request, r):
    # japronto adds '; charset=utf-8' to text/* and */json itself.
    return request.Response(code=r.status, body=r.body,
                            mime_type=r.content_type.split(';')[0],
                            headers=dict(r.headers) or None)


def _now(coroutine):
    """The result of a page coroutine that never waits."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError('%s waited' % coroutine.__qualname__)


def _handler(page):
    async def handle(request):
        try:
            r = await page(_request(request), **request.match_dict)
            return _response(request, r)
        finally:
            feed_later(request)
    return handle


def _at_once(page):
    def handle(request):
        return _response(request, _now(page(_request(request))))
    return handle


def make_app(site):
    app = Application()
    for method, path, name in ROUTES:
        wrap = _at_once if name in AT_ONCE else _handler
        app.router.add_route(path, wrap(getattr(site, name)), method=method)

    def unrouted(request, exception):
        r = static_page(request.path) if request.method == 'GET' else None
        return _response(request, r or _now(site.not_found(_request(request))))
    app.add_error_handler(RouteNotFoundException, unrouted)
    # japronto's own prints every unparsable request to stdout.
    app.protocol_error_handler = lambda error: Refused(400).response()
    return app


def at_once_prefixes():
    """Request-line prefixes that japronto answers without waiting."""
    return tuple(('%s %s ' % (method, path)).encode()
                 for method, path, name in ROUTES if name in AT_ONCE
                 ) + AT_ONCE_PREFIXES


async def serve(site, host, port, stopped):
    """Serve until the `stopped` event is set, then finish pending requests."""
    app = make_app(site)
    loop = asyncio.get_event_loop()
    app._loop = loop
    app._Application__finalize()    # router -> matcher, idle reaper
    connections = set()
    prefixes = at_once_prefixes()
    server = await loop.create_server(
        lambda: Connection(Protocol(app), prefixes, MAX_BODY, connections),
        host, port, backlog=1024, reuse_address=True)
    try:
        await stopped.wait()
    finally:
        server.close()
        await server.wait_closed()
        await drain(connections)
        app._reaper.stop()
