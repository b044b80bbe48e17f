"""BlackSheep adapter: the pages as routes of a BlackSheep Application (its
Router, Request and Response, its Cython core), served by uvicorn as
uvicorn_server serves any ASGI application (behind edge.py)."""
from blacksheep import Application, Content, Request, Response
from blacksheep.server.routing import Router

from runtime import edge
from asgi_server import bounded_body, parse_cookies
from pages import Request as PageRequest
from pages.http import text_response
from pages.static import unrouted

from uvicorn_server import serve_app

GONE = text_response(400, 'The request body did not arrive')
CLOSE = (b'connection', b'close')


def cookies(request):
    """BlackSheep's cookies; those it cannot decode (it takes UTF-8 only)
    parsed as the bare ASGI application does."""
    try:
        return request.cookies
    except UnicodeDecodeError:
        return parse_cookies(b'; '.join(request.get_headers(b'cookie')))


def _answer(r, close=False, types={}):
    content_type = types.get(r.content_type)
    if content_type is None:
        content_type = types[r.content_type] = r.content_type.encode()
    # A new list: BlackSheep adds the content headers to it.
    headers = [(name.encode('latin-1'), value.encode('latin-1'))
               for name, value in r.headers]
    if close:   # the rest of a refused body is not read
        headers.append(CLOSE)
    return Response(r.status, headers, Content(content_type, r.body))


def _handler(page, body_timeout=None):
    """A request handler for the page; body_timeout: the seconds its body
    may take after the head, None for a route without a body."""
    async def handler(request: Request):
        body = b''
        if body_timeout is not None:
            # Bounded in size and time, as the bare ASGI application reads it.
            body = await bounded_body(request.content.receive,
                               request.get_first_header(b'content-length'),
                               body_timeout)
            if body is None:
                return _answer(GONE, close=True)
            if not isinstance(body, bytes):
                return _answer(body, close=True)
        scope = request.scope
        client = scope.get('client')
        agent = request.get_first_header(b'user-agent')
        forwarded = request.get_first_header(b'x-forwarded-for')
        r = await page(PageRequest(
            scope['method'], scope['path'], cookies(request),
            client[0] if client else '',
            agent.decode('utf-8', 'surrogateescape') if agent else '', body,
            forwarded.decode('latin-1') if forwarded else ''),
            **(request.route_values or {}))
        return _answer(r)
    return handler


def make_app(site, limits=edge.LIMITS):
    router = Router()
    for route in site.routes():
        with_body = route.method != 'GET'
        handler = _handler(route.handler, limits.body if with_body else None)
        router.add(route.method, route.path, handler)
        if route.method == 'GET':
            router.add('HEAD', route.path, handler)
    # Static files and the 404 page: the unrouted page reads the path itself.
    router.fallback = _handler(unrouted(site))
    return Application(router=router)


async def serve(site, host, port, stopped, limits=edge.LIMITS):
    """Serve until the `stopped` event is set, then finish pending requests."""
    app = make_app(site, limits)
    await app.start()
    try:
        await serve_app(app, host, port, stopped, limits)
    finally:
        await app.stop()
