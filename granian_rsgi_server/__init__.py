"""The site as a bare RSGI application (granian's native interface, not
ASGI): what asgi_server's application does (its routing table, HEAD, the
body limit in size and time, cookies, headers) on RSGI's scope and protocol
objects, served by granian_server's embedded server and limits with
Interfaces.RSGI."""
from granian.constants import Interfaces
from granian.rsgi import ProtocolClosed, ProtocolError

from runtime import edge
from asgi_server import _table, bounded_body, parse_cookies, route
from granian_server import serve_app
from pages import Request
from pages.http import EVERY
from pages.static import unrouted

CLOSE = ('connection', 'close')
NO_COOKIES = {}     # shared: pages only read cookies
END = {'type': 'http.request', 'body': b'', 'more_body': False}
GONE = {'type': 'http.disconnect'}


def receiver(protocol):
    """An ASGI receive callable over the RSGI body's chunks, for
    asgi_server's bounded body reading."""
    chunks = protocol.__aiter__()

    async def receive():
        try:
            chunk = await chunks.__anext__()
        except StopAsyncIteration:
            return END
        except (ProtocolClosed, ProtocolError):
            return GONE
        return {'type': 'http.request', 'body': chunk, 'more_body': True}
    return receive


def client_ip(client):
    """The address of RSGI's 'ADDRESS:PORT' client ('[::1]:PORT' too)."""
    return client.rpartition(':')[0].strip('[]')


def make_app(site, limits=None):
    """The RSGI application serving site's routes, else the unrouted page
    (static files, 404)."""
    exact, patterns = _table(site)
    # granian's core is not wrapped by edge: the body time limit is here.
    body_timeout = (limits or edge.LIMITS).body
    missing = unrouted(site)
    # id(Response) -> (Response, headers): the pages answer many requests
    # with one Response, whose headers are then built once. Bounded:
    # emptied when full.
    made = {}

    def headers_of(r, close=False):
        headers = [('content-type', r.content_type)]
        headers += EVERY
        headers += r.headers
        if close:
            headers.append(CLOSE)
        return headers

    async def app(scope, protocol):
        method, path = scope.method, scope.path
        cookie = agent = forwarded = ''
        length = chunked = None
        # Names come in lower case; granian leaves out a value that is not
        # visible ASCII.
        for name, value in scope.headers.items():
            if name == 'cookie':
                cookie = cookie + '; ' + value if cookie else value
            elif name == 'user-agent':
                agent = value
            elif name == 'x-forwarded-for':
                forwarded = value
            elif name == 'content-length':
                length = value.encode('latin-1', 'replace')
            elif name == 'transfer-encoding':
                chunked = value
        body = b''
        if chunked is not None or (length is not None and length != b'0'):
            body = await bounded_body(receiver(protocol), length, body_timeout)
            if body is None:    # the client left
                return
            if not isinstance(body, bytes):     # refused
                # HEAD too: granian sends no body for it.
                protocol.response_bytes(body.status,
                                        headers_of(body, close=True),
                                        body.body)
                return
        request = Request(method, path,
                          parse_cookies(cookie.encode('latin-1', 'replace'))
                          if cookie else NO_COOKIES,
                          client_ip(scope.client), agent, body, forwarded)
        handler, params = route(exact, patterns, missing, method, path)
        r = await handler(request, **params)
        found = made.get(id(r))
        if found is None or found[0] is not r:
            if len(made) >= 64:
                made.clear()
            found = made[id(r)] = (r, headers_of(r))
        # granian counts the length, and leaves the body out for HEAD.
        protocol.response_bytes(r.status, found[1], r.body)
    return app


async def serve(site, host, port, stopped, limits=edge.LIMITS):
    """Serve the site until `stopped` is set, then finish pending requests."""
    await serve_app(make_app(site, limits), host, port, stopped, limits,
                    Interfaces.RSGI)
