"""Starlette adapter: the pages as Starlette Routes with its Request and
Response, served by uvicorn as uvicorn_server serves any ASGI application
(behind edge.py). FastAPI's base without FastAPI."""
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from runtime import edge
from asgi_server import bounded_body, header_text
from pages import Request as PageRequest
from pages.http import text_response
from pages.static import unrouted

from uvicorn_server import serve_app

GONE = text_response(400, 'The request body did not arrive')


async def _body(request, timeout):
    # Bounded in size and time, as the bare ASGI application reads it.
    return await bounded_body(request.receive,
                              request.headers.get('content-length'), timeout)


def _answer(r):
    return Response(r.body, r.status, dict(r.headers) if r.headers else None,
                    r.content_type)


def _endpoint(page, body_timeout=None):
    """A Starlette endpoint for the page; body_timeout: the seconds its body
    may take after the head, None for a route without a body."""
    async def endpoint(request):
        body = b''
        if body_timeout is not None:
            body = await _body(request, body_timeout)
            if body is None:
                return _answer(GONE)
            if not isinstance(body, bytes):
                return _answer(body)
        client = request.client
        r = await page(PageRequest(
            request.method, request.scope['path'], request.cookies,
            client.host if client else '',
            header_text(request.headers.get('user-agent', '')), body,
            request.headers.get('x-forwarded-for', '')),
            **request.path_params)
        return _answer(r)
    return endpoint


def make_app(site, limits=edge.LIMITS):
    # GET routes answer HEAD too (Starlette adds it; uvicorn drops the body).
    routes = [Route(route.path, _endpoint(
                  route.handler, None if route.method == 'GET' else limits.body),
                  methods=[route.method])
              for route in site.routes()]
    # Static files and the 404 page: the unrouted page reads the path itself.
    routes.append(Route('/{tail:path}', _endpoint(unrouted(site)),
                        methods=['GET']))
    return Starlette(routes=routes)


async def serve(site, host, port, stopped, limits=edge.LIMITS):
    """Serve until the `stopped` event is set, then finish pending requests."""
    await serve_app(make_app(site, limits), host, port, stopped, limits)
