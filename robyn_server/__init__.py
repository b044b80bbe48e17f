"""Robyn adapter: one Robyn route per page (its `:name` path parameters),
handlers taking Robyn's `Request` and answering its `Response`, a catch-all
route for static files and the 404 page. Robyn's Rust server (actix-web)
runs in this process, its handlers in server.py's loop (held.py); its
limits are its own (docs/robyn.md)."""
import logging
import sys
from urllib.parse import unquote

from robyn import Headers, HttpMethod, Request, Response, Robyn
from robyn.argument_parser import Config

from runtime import edge
from asgi_server import parse_cookies
from pages import MAX_BODY, Request as PageRequest
from pages.http import EVERY, text_response
from pages.static import unrouted

from . import held

# Robyn logs a line per route added, at INFO; actix-web an error per
# request it cannot parse (answered 400).
logging.getLogger('robyn').setLevel(logging.WARNING)
logging.getLogger('actix_http').setLevel(logging.CRITICAL)
# Every method Robyn routes: those no page takes reach the 404 page.
METHODS = tuple(getattr(HttpMethod, m) for m in (
    'GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'CONNECT',
    'TRACE'))
TOO_LARGE = text_response(413, 'Request body too large.')


def _decoded(raw):
    """A path (or a part) as Robyn gives it, its %-escapes decoded."""
    return unquote(raw, errors='replace') if '%' in raw else raw


def _answer(r, head=False):
    """Robyn's Response; for HEAD without the body (actix-web then says
    Content-Length: 0): actix-web drops a HEAD answer's body only when no
    request is pipelined behind it."""
    headers = Headers({})
    for key, value in EVERY + (('Content-Type', r.content_type),) + r.headers:
        headers.append(key, value)
    return Response(r.status, headers, b'' if head else r.body)


def _handler(page, head=False):
    async def handler(request: Request):
        body = request.body     # str when it is UTF-8
        body = body if isinstance(body, bytes) else body.encode()
        if len(body) > MAX_BODY:
            return _answer(TOO_LARGE)
        h = request.headers
        params = {k: _decoded(v) for k, v in request.path_params.items()}
        held.busy[0] += 1
        try:
            r = await page(PageRequest(
                request.method, _decoded(request.url.path),
                parse_cookies((h.get('cookie') or '').encode()),
                request.ip_addr or '', h.get('user-agent') or '', body,
                h.get('x-forwarded-for') or ''), **params)
        finally:
            held.busy[0] -= 1
        return _answer(r, head)
    return handler


def _config():
    """Robyn's settings, not read from server.py's command line: no
    OpenAPI routes, warnings only."""
    argv, sys.argv = sys.argv, sys.argv[:1]
    try:
        config = Config()
    finally:
        sys.argv = argv
    config.disable_openapi = True
    config.log_level = 'WARN'
    return config


def make_app(site):
    app = Robyn(__file__, config=_config())
    for route in site.routes():
        path = route.path.replace('{', ':').replace('}', '')
        app.add_route(route.method, path, _handler(route.handler))
        if route.method == 'GET':
            app.add_route('HEAD', path, _handler(route.handler, True))
    for method in METHODS:
        app.add_route(method, '/*tail',
                      _handler(unrouted(site), method == HttpMethod.HEAD))
    return app


async def serve(site, host, port, stopped, limits=edge.LIMITS):
    """Serve until the `stopped` event is set, then finish pending requests."""
    if stopped.is_set():
        return
    server = await held.start(make_app(site), host, port, limits.reuse_port)
    try:
        await stopped.wait()
    finally:
        await held.stop(server)
