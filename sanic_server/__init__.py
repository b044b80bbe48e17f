"""sanic adapter: translates requests and responses for pages.Site."""
import asyncio
import itertools
import logging
import os

from sanic import Sanic
from sanic.response import HTTPResponse, file

from pages import FAVICON, MAX_BODY, ROUTES, SESSION_COOKIE, STATIC, Request

_names = itertools.count(1)


def _handler(page):
    async def handle(request, **params):
        r = await page(Request(
            request.method, request.path, request.cookies.get(SESSION_COOKIE),
            request.ip, request.headers.get('user-agent', ''),
            request.body or b''), **params)
        return HTTPResponse(r.body, r.status, r.headers, r.content_type)
    return handle


def make_app(site):
    app = Sanic('stickers_%d' % next(_names), configure_logging=False)
    app.config.REQUEST_MAX_SIZE = MAX_BODY
    app.config.ACCESS_LOG = False
    app.config.MOTD = False
    for method, path, name in ROUTES:
        path = path.replace('{', '<').replace('}', '>')
        app.add_route(_handler(getattr(site, name)), path, methods=[method],
                      name='%s_%s' % (name, method.lower()))
    for prefix, directory in STATIC:
        os.makedirs(directory, exist_ok=True)
        app.static(prefix, directory, name=prefix.strip('/'))

    async def favicon(request):
        return await file(FAVICON)
    app.add_route(favicon, '/favicon.ico')
    app.add_route(_handler(site.not_found), '/<tail:path>', name='not_found')
    return app


async def serve(site, host, port, stopped):
    """Serve until the `stopped` event is set, then finish pending requests."""
    app = make_app(site)
    server = await app.create_server(host=host, port=port, access_log=False,
                                     return_asyncio_server=True, backlog=1024)
    await server.startup()
    await server.start_serving()
    try:
        await stopped.wait()
    finally:
        server.server.close()
        for _ in range(100):
            for conn in list(server.connections):
                conn.close_if_idle()
            if not server.connections:
                break
            await asyncio.sleep(0.1)
        for conn in list(server.connections):
            logging.getLogger('sanic_server').warning('aborting a busy connection')
            conn.abort()
