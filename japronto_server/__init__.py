"""japronto adapter: translates requests and responses for pages.Site.

japronto serves here on the engine's event loop (asyncio or uvloop): its
app.run() would fork a worker with a uvloop loop of its own and its own
signal handling, so serve() does what that worker does, on this loop.
pipeline.py keeps japronto's request pipeline within what it survives, and
is the connection's edge.
"""
import asyncio
import functools

from runtime import edge
from japronto import Application
from japronto.protocol.cprotocol import Protocol
from japronto.router import RouteNotFoundException

from pages import MAX_BODY, Request
from pages.http import EVERY, FRAMING
from pages.static import unrouted
from .pipeline import Connection, Refused, drain, feed_later

# Pages that never wait (Route.waits false) get plain functions as
# handlers, which japronto answers at once, so pipelined requests for them
# go through in batches.
# Unrouted GETs (static files, 404) are answered at once too.
AT_ONCE_PREFIXES = (b'GET /static/', b'GET /img/', b'GET /favicon.ico ')
# japronto renders no status above 417 (its table of reasons ends there):
# 429 (per-IP limits, when on) is written by _written().
MAX_4XX = 417
REASONS = {429: 'Too Many Requests'}
# The headers of most responses, made once (japronto only reads them).
HEADERS = {(): dict(EVERY), FRAMING: dict(EVERY + FRAMING)}
MIME = {}   # Content-Type -> without its charset
NOT_UTF8 = '/\ufffd'     # the path of a request whose path is not UTF-8


def _path(request):
    """The decoded path; japronto raises SystemError for one that is not
    UTF-8 once percent-decoded, which can then name no page's argument."""
    try:
        return request.path
    except SystemError:
        return NOT_UTF8


def _header(request, name):
    """A header as the other frameworks give it: japronto decodes header
    bytes as Latin-1, they as UTF-8 with surrogateescape."""
    value = request.headers.get(name, '')
    if value.isascii():
        return value
    return value.encode('latin-1').decode('utf-8', 'surrogateescape')


def _request(request):
    return Request(request.method, _path(request), request.cookies,
                   request.remote_addr, _header(request, 'User-Agent'),
                   request.body or b'', _header(request, 'X-Forwarded-For'))


class _Lazy:
    """A pages.http.Request whose fields japronto makes only when a page
    reads them: /ugly and /about read none. Only for pages answered at once,
    while japronto still holds the request."""
    __slots__ = ('r',)

    def __init__(self, request):
        self.r = request

    method = property(lambda self: self.r.method)
    path = property(lambda self: _path(self.r))
    cookies = property(lambda self: self.r.cookies)
    ip = property(lambda self: self.r.remote_addr)
    user_agent = property(lambda self: _header(self.r, 'User-Agent'))
    body = property(lambda self: self.r.body or b'')
    forwarded = property(lambda self: _header(self.r, 'X-Forwarded-For'))


def _response(request, r, head=False):
    # japronto adds '; charset=utf-8' to text/* and */json itself. It
    # cannot leave out a body: HEAD answers say Content-Length: 0.
    if MAX_4XX < r.status < 500:
        return _written(request, r, head)
    mime = MIME.get(r.content_type)
    if mime is None:
        mime = MIME[r.content_type] = r.content_type.split(';')[0]
    headers = HEADERS.get(r.headers)
    if headers is None:
        headers = dict(EVERY + r.headers)
    return request.Response(code=r.status, body=b'' if head else r.body,
                            mime_type=mime, headers=headers)


def _written(request, r, head):
    """Write an answer japronto cannot render, and have the connection
    close in place of japronto's own answer (see _Transport)."""
    lines = ['HTTP/1.1 %d %s' % (r.status, REASONS[r.status]),
             'Content-Type: ' + r.content_type,
             'Content-Length: %d' % len(r.body), 'Connection: close']
    lines.extend('%s: %s' % field for field in EVERY + r.headers)
    transport = request.transport
    transport.transport.write(('\r\n'.join(lines) + '\r\n\r\n').encode('latin-1')
                              + (b'' if head else r.body))
    transport.muted = True
    return request.Response(code=500)


class _Transport:
    """What japronto writes to: the connection's transport, except that
    once muted it closes the connection in place of writing."""
    __slots__ = ('transport', 'muted')

    def __init__(self, transport):
        self.transport = transport
        self.muted = False

    def write(self, data):
        if self.muted:
            self.transport.close()
        else:
            self.transport.write(data)

    def __getattr__(self, name):
        return getattr(self.transport, name)


def _now(coroutine):
    """The result of a page coroutine that never waits."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError('%s waited' % coroutine.__qualname__)


def _handler(page, head=False, route=None, missing=None):
    async def handle(request):
        # While a page waits, edge must not time its connection out.
        conn = edge.protocol_of(request.transport)
        conn.enter()
        try:
            try:
                params = request.match_dict
            except SystemError:     # not UTF-8 (see _path): names nothing
                r = await missing(_request(request)._replace(path=route))
            else:
                r = await page(_request(request), **params)
            return _response(request, r, head)
        finally:
            conn.leave()
            feed_later(request)
    return handle


def _at_once(page, head=False):
    def handle(request):
        return _response(request, _now(page(_Lazy(request))), head)
    return handle


def make_app(site):
    app = Application()
    for route in site.routes():
        if route.waits:
            wrap = functools.partial(_handler, route=route.path,
                                     missing=site.not_found)
        else:
            wrap = _at_once
        app.router.add_route(route.path, wrap(route.handler),
                             method=route.method)
        if route.method == 'GET':
            app.router.add_route(route.path, wrap(route.handler, True),
                                 method='HEAD')

    page = unrouted(site)     # a static file, else the 404 page

    def not_routed(request, exception):
        return _response(request, _now(page(_Lazy(request))),
                         request.method == 'HEAD')
    app.add_error_handler(RouteNotFoundException, not_routed)
    # japronto's own prints every unparsable request to stdout.
    app.protocol_error_handler = lambda error: Refused(400).response()
    return app


def at_once_prefixes(site):
    """Request-line prefixes that japronto answers without waiting."""
    return tuple(('%s %s ' % (route.method, route.path)).encode()
                 for route in site.routes() if not route.waits
                 ) + AT_ONCE_PREFIXES


class _Limited(Connection):
    """With per-IP limits on, japronto writes through a _Transport."""
    __slots__ = ()

    def inner_transport(self, transport):
        return _Transport(transport)


async def serve(site, host, port, stopped, limits=edge.LIMITS):
    """Serve until the `stopped` event is set, then finish pending requests."""
    app = make_app(site)
    loop = asyncio.get_event_loop()
    # japronto has no public way to serve on a given loop (app.run() forks
    # a worker with a loop of its own): set what run() would, by hand.
    app._loop = loop
    app._Application__finalize()    # router -> matcher, idle reaper
    connections = set()
    prefixes = at_once_prefixes(site)
    gate = edge.Gate(limits, loop)
    # Any per-IP or per-session limit may answer 429, which japronto
    # cannot render: those connections write through a _Transport.
    protocol = _Limited if site.refusals else Connection
    server = await loop.create_server(
        lambda: protocol(gate, lambda: Protocol(app), prefixes, MAX_BODY,
                         connections),
        host, port, backlog=1024, reuse_address=True,
        reuse_port=limits.reuse_port or None)
    try:
        await stopped.wait()
    finally:
        server.close()
        await server.wait_closed()
        await drain(connections)
        app._reaper.stop()     # what run() stops at its end
