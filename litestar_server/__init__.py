"""Litestar adapter: the pages as Litestar route handlers with its Request
and Response, served by uvicorn as uvicorn_server serves any ASGI
application (behind edge.py)."""
import re

from litestar import Litestar, Request, Response, route
from litestar.exceptions import NotFoundException

from runtime import edge
from asgi_server import bounded_body, header_text
from pages import MAX_BODY
from pages import Request as PageRequest
from pages.http import text_response
from pages.static import unrouted

from uvicorn_server import serve_app

GONE = text_response(400, 'The request body did not arrive')
PARAM = re.compile(r'\{(\w+)\}')


async def _body(request, timeout):
    # Bounded in size and time, as the bare ASGI application reads it.
    return await bounded_body(request.receive,
                              request.headers.get('content-length'), timeout)


def _answer(r):
    # The type as the page gives it (Litestar would add a second charset).
    headers = {'content-type': r.content_type}
    headers.update(r.headers)
    return Response(r.body, status_code=r.status, headers=headers)


def _page_request(request, body=b''):
    client = request.client
    return PageRequest(
        request.method, request.scope['path'], request.cookies,
        client.host if client else '',
        header_text(request.headers.get('user-agent', '')), body,
        request.headers.get('x-forwarded-for', ''))


class _Unrouted(Response):
    """What Litestar's exception handler for an unmatched path answers: the
    site's 404 page (its handlers are sync, the page is awaited here)."""

    def __init__(self, page):
        super().__init__(b'')
        self.page = page

    def to_asgi_response(self, app, request, **kwargs):
        async def asgi(scope, receive, send):
            r = await self.page(_page_request(request))
            await _answer(r).to_asgi_response(app, request, **kwargs)(
                scope, receive, send)
        return asgi


def _handler(page, path, methods, body_timeout=None):
    """A Litestar route handler for the page at `path` ({name} parameters,
    typed as str for Litestar); body_timeout: the seconds its body may take
    after the head, None for a route without a body."""
    async def handler(request: Request) -> Response:
        body = b''
        if body_timeout is not None:
            body = await _body(request, body_timeout)
            if body is None:
                return _answer(GONE)
            if not isinstance(body, bytes):
                return _answer(body)
        r = await page(_page_request(request, body), **request.path_params)
        return _answer(r)
    return route(PARAM.sub(r'{\1:str}', path), http_method=methods,
                 name=path)(handler)


def make_app(site, limits=edge.LIMITS):
    handlers = [_handler(r.handler, r.path, ['GET', 'HEAD'])
                if r.method == 'GET' else
                _handler(r.handler, r.path, [r.method], limits.body)
                for r in site.routes()]
    # Static files and the 404 page: the unrouted page reads the path itself.
    # Litestar does not fall back to this route below a matched prefix
    # (/packs/a/b/c): its 404 exception handler answers those.
    missing = unrouted(site)
    handlers.append(_handler(missing, '/{tail:path}', ['GET', 'HEAD']))
    unmatched = _Unrouted(missing)
    # What a deployment of this site turns off: it has no OpenAPI schema or
    # docs pages, leaves logging to server.py, reads bodies itself.
    return Litestar(route_handlers=handlers, openapi_config=None,
                    exception_handlers={
                        NotFoundException: lambda request, exc: unmatched},
                    logging_config=None, debug=False,
                    request_max_body_size=MAX_BODY)


async def serve(site, host, port, stopped, limits=edge.LIMITS):
    """Serve until the `stopped` event is set, then finish pending requests."""
    await serve_app(make_app(site, limits), host, port, stopped, limits)
