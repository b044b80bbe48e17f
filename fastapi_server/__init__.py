"""FastAPI adapter: the pages as FastAPI routes with Starlette responses,
served by uvicorn as uvicorn_server serves any ASGI application (behind
edge.py, which asks uvicorn whether a page works for a connection)."""
import inspect

from fastapi import FastAPI, Request
from fastapi.responses import Response

from runtime import edge
from asgi_server import header_text, read_body
from pages import MAX_BODY
from pages import Request as PageRequest
from pages.http import text_response
from pages.static import unrouted

from uvicorn_server import serve_app

GONE = text_response(400, 'The request body did not arrive')


def _answer(r):
    return Response(content=r.body, status_code=r.status,
                    media_type=r.content_type,
                    headers=dict(r.headers) if r.headers else None)


def _endpoint(page, names, body_timeout=None):
    """A route function for the page; `names` its path parameters;
    body_timeout: the seconds its body may take after the head, None for a
    route without a body."""
    async def endpoint(request: Request, **params):
        scope = request.scope
        body = b''
        if body_timeout is not None:
            # Bounded in size and time, as the bare ASGI application reads it.
            body = await read_body(request.receive, body_timeout)
            if body is None:
                return _answer(GONE)
            if not isinstance(body, bytes):
                return _answer(body)
        client = scope.get('client')
        r = await page(PageRequest(
            scope['method'], scope['path'], request.cookies,
            client[0] if client else '',
            header_text(request.headers.get('user-agent', '')), body,
            request.headers.get('x-forwarded-for', '')), **params)
        return _answer(r)
    # The path parameters, declared to FastAPI as plain strings.
    endpoint.__signature__ = inspect.Signature(
        [inspect.Parameter('request', inspect.Parameter.POSITIONAL_OR_KEYWORD,
                           annotation=Request)]
        + [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                             annotation=str) for name in names])
    return endpoint


def path_parameters(path):
    return [part[1:-1] for part in path.split('/') if part.startswith('{')]


def make_app(site, limits=edge.LIMITS):
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    # The app's own APIRouter: an included one would be matched as a second
    # level on every request.
    router = app.router
    for route in site.routes():
        methods = ['GET', 'HEAD'] if route.method == 'GET' else [route.method]
        with_body = route.method != 'GET'
        router.add_api_route(
            route.path, _endpoint(route.handler, path_parameters(route.path),
                                  limits.body if with_body else None),
            methods=methods, include_in_schema=False,
            max_body_size=MAX_BODY if with_body else None)
    # Static files and the 404 page: the unrouted page reads the path itself.
    router.add_api_route(
        '/{tail:path}', _endpoint(unrouted(site), ()),
        methods=['GET', 'HEAD'], include_in_schema=False)
    return app


async def serve(site, host, port, stopped, limits=edge.LIMITS):
    """Serve until the `stopped` event is set, then finish pending requests."""
    await serve_app(make_app(site, limits), host, port, stopped, limits)
