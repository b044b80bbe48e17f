"""Quart adapter: the pages as Quart view functions (URL rules, its request
context and Response), served by uvicorn as uvicorn_server serves any ASGI
application (behind edge.py), not on Hypercorn: edge wraps uvicorn's
protocol."""
import re

from quart import Quart, Response, request

from runtime import edge
from asgi_server import header_text
from pages import MAX_BODY
from pages import Request as PageRequest
from pages.static import unrouted

from uvicorn_server import serve_app

PARAM = re.compile(r'\{(\w+)\}')


def _view(page, with_body=False):
    """A Quart view function for the page; with_body: it reads the request
    body (Quart bounds it: MAX_CONTENT_LENGTH, BODY_TIMEOUT)."""
    async def view(**params):
        body = await request.get_data() if with_body else b''
        r = await page(PageRequest(
            request.method, request.path, request.cookies,
            request.remote_addr or '',
            header_text(request.headers.get('User-Agent', '')), body,
            request.headers.get('X-Forwarded-For', '')), **params)
        return Response(r.body, r.status, list(r.headers),
                        content_type=r.content_type)
    return view


def make_app(site, limits=edge.LIMITS):
    # No static folder: Quart would route /static/ itself.
    app = Quart(__name__, static_folder=None)
    # Its own body limits; no automatic OPTIONS answers (the site has none).
    app.config.update(MAX_CONTENT_LENGTH=MAX_BODY, BODY_TIMEOUT=limits.body,
                      PROVIDE_AUTOMATIC_OPTIONS=False)
    for route in site.routes():
        # A GET rule answers HEAD too (uvicorn leaves the body out).
        app.add_url_rule(PARAM.sub(r'<\1>', route.path),
                         route.method + ' ' + route.path,
                         _view(route.handler, route.method != 'GET'),
                         methods=[route.method])
    # Static files and the 404 page: the unrouted page reads the path itself.
    app.add_url_rule('/<path:tail>', 'unrouted', _view(unrouted(site)),
                     methods=['GET'])
    return app


async def serve(site, host, port, stopped, limits=edge.LIMITS):
    """Serve until the `stopped` event is set, then finish pending requests."""
    await serve_app(make_app(site, limits), host, port, stopped, limits)
