"""Falcon adapter: the pages as resources of a falcon.asgi.App (on_get,
on_head, on_post responders) with Falcon's Request and Response, served by
uvicorn as uvicorn_server serves any ASGI application (behind edge.py)."""
import asyncio

import falcon.asgi

from runtime import edge
from asgi_server import SLOW, TOO_LARGE, header_text
from pages import MAX_BODY
from pages import Request as PageRequest
from pages.static import unrouted

from uvicorn_server import serve_app


async def _body(req, timeout):
    """The body, read from Falcon's stream bounded in size and time; else
    the Response refusing it."""
    length = req.content_length
    if length is not None and length > MAX_BODY:
        return TOO_LARGE
    try:
        body = await asyncio.wait_for(req.stream.read(MAX_BODY + 1), timeout)
    except asyncio.TimeoutError:
        return SLOW
    return TOO_LARGE if len(body) > MAX_BODY else body


def _answer(resp, r):
    resp.status = r.status
    resp.content_type = r.content_type
    resp.data = r.body
    for name, value in r.headers:
        resp.append_header(name, value)


def _responder(page, body_timeout=None):
    """A Falcon responder for the page; body_timeout: the seconds its body
    may take after the head, None for a responder without a body."""
    async def responder(req, resp, **params):
        body = b''
        if body_timeout is not None:
            body = await _body(req, body_timeout)
            if not isinstance(body, bytes):
                return _answer(resp, body)
        client = req.scope.get('client')
        _answer(resp, await page(PageRequest(
            req.method, req.path, req.cookies, client[0] if client else '',
            header_text(req.user_agent or ''), body,
            req.get_header('X-Forwarded-For') or ''),
            **params))
    return responder


class Resource:
    """The pages at one path: a responder for each of their methods (a GET
    page answers HEAD too; uvicorn leaves the body out)."""

    def __init__(self, routes, limits):
        for route in routes:
            if route.method == 'GET':
                self.on_get = self.on_head = _responder(route.handler)
            else:
                setattr(self, 'on_' + route.method.lower(),
                        _responder(route.handler, limits.body))


def make_app(site, limits=edge.LIMITS):
    app = falcon.asgi.App()
    paths = {}
    for route in site.routes():
        paths.setdefault(route.path, []).append(route)
    for path, routes in paths.items():
        app.add_route(path, Resource(routes, limits))
    # Static files and the 404 page, for every path no route takes: the
    # unrouted page reads the path itself.
    app.add_sink(_responder(unrouted(site)), prefix='/')
    return app


async def serve(site, host, port, stopped, limits=edge.LIMITS):
    """Serve until the `stopped` event is set, then finish pending requests."""
    await serve_app(make_app(site, limits), host, port, stopped, limits)
