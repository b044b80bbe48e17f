"""sanic adapter: translates requests and responses for pages.Site."""
import asyncio
import itertools
import logging

from sanic import Sanic
from sanic.response import HTTPResponse
from sanic.server.protocols.http_protocol import HttpProtocol

from runtime import edge
from pages import MAX_BODY, Request
from pages.http import EVERY
from pages.static import unrouted

_names = itertools.count(1)


def _handler(page, waits=True):
    async def handle(request, **params):
        # While a page waits, edge must not time its connection out.
        conn = edge.protocol_of(request.transport) if waits else edge.GONE
        conn.enter()
        try:
            r = await page(Request(
                request.method, request.path, request.cookies, request.ip,
                request.headers.get('user-agent', ''), request.body or b'',
                request.headers.get('x-forwarded-for', '')),
                **params)
        finally:
            conn.leave()
        return HTTPResponse(r.body, r.status, EVERY + r.headers, r.content_type)
    return handle


def make_app(site, limits=edge.LIMITS):
    app = Sanic('stickers_%d' % next(_names), configure_logging=False)
    app.config.REQUEST_MAX_SIZE = MAX_BODY
    app.config.ACCESS_LOG = False
    app.config.MOTD = False
    # edge.Edge enforces these; sanic's own are only a backstop.
    app.config.REQUEST_TIMEOUT = limits.head + limits.body + 1
    app.config.KEEP_ALIVE_TIMEOUT = limits.keepalive + 1
    for i, route in enumerate(site.routes()):
        path = route.path.replace('{', '<').replace('}', '>')
        methods = ['GET', 'HEAD'] if route.method == 'GET' else [route.method]
        app.add_route(_handler(route.handler, route.waits), path,
                      methods=methods, name='page_%d' % i)
    app.add_route(_handler(unrouted(site), False), '/<tail:path>',
                  methods=['GET', 'HEAD'], name='unrouted')
    return app


async def serve(site, host, port, stopped, limits=edge.LIMITS):
    """Serve until the `stopped` event is set, then finish pending requests."""
    app = make_app(site, limits)
    gate = edge.Gate(limits)

    def protocol(**kwargs):
        return gate.protocol(lambda: HttpProtocol(**kwargs))()
    # sanic sets reuse_port only for workers of its own: bind here instead.
    where = {'host': host, 'port': port}
    if limits.reuse_port:
        where = {'sock': edge.listening_socket(host, port, reuse_port=True)}
    server = await app.create_server(**where, access_log=False,
                                     return_asyncio_server=True, backlog=1024,
                                     protocol=protocol)
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
