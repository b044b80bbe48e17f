"""The site as a bare ASGI 3 application: routing, HEAD, the body limit,
cookies and headers done here, with no framework. uvicorn_server and
granian_server serve it."""
import asyncio
import re

from runtime import edge
from pages import MAX_BODY
from pages.http import NOSNIFF, SERVER, text_response
from pages.http import cookies_of, new_request
from pages.static import unrouted

EVERY = [(b'server', SERVER.encode()),
         (NOSNIFF[0].lower().encode(), NOSNIFF[1].encode())]
TOO_LARGE = text_response(413, 'Request body too large.')
BAD_LENGTH = text_response(400, 'Bad Content-Length.')
SLOW = text_response(408, 'The request body came too slowly.')
CLOSE = (b'connection', b'close')
NO_COOKIES = {}     # shared: pages only read cookies
NO_PARAMS = {}      # shared: never written
EMPTY = {'type': 'http.response.body', 'body': b''}
PARAM = re.compile(r'\{(\w+)\}')


def parse_cookies(header):
    """name -> value from a Cookie header (bytes); see
    pages.http.parse_cookies."""
    return cookies_of(header.decode('latin-1'))


def _pattern(path):
    """A regex matching `path` with its {name} parameters, one segment each."""
    parts = PARAM.split(path)
    regex = ''.join(re.escape(p) if i % 2 == 0 else '(?P<%s>[^/]+)' % p
                    for i, p in enumerate(parts))
    return re.compile(regex + r'\Z')


def _table(site, routes=None):
    """(path -> {method: handler}, [(regex, {method: handler})]) of
    `routes` (by default the site's)."""
    exact, patterns = {}, {}
    for route in site.routes() if routes is None else routes:
        methods = ('GET', 'HEAD') if route.method == 'GET' else (route.method,)
        if PARAM.search(route.path):
            handlers = patterns.setdefault(route.path, {})
        else:
            handlers = exact.setdefault(route.path, {})
        for method in methods:
            handlers[method] = route.handler
    return exact, [(_pattern(path), h) for path, h in patterns.items()]


def scan(headers):
    """(cookie, user agent, forwarded, content-length, transfer-encoding)
    of ASGI headers: b'' for the first three when absent, None for the
    last two. Repeated Cookie headers are joined."""
    cookie = agent = forwarded = b''
    length = chunked = None
    for name, value in headers:
        if name == b'cookie':
            cookie = cookie + b'; ' + value if cookie else value
        elif name == b'user-agent':
            agent = value
        elif name == b'x-forwarded-for':
            forwarded = value
        elif name == b'content-length':
            length = value
        elif name == b'transfer-encoding':
            chunked = value
    return cookie, agent, forwarded, length, chunked


def request_of(scope, body, cookie, agent, forwarded):
    """The pages.http.Request of an ASGI scope and what scan() found."""
    client = scope['client']
    return new_request((
        scope['method'], scope['path'],
        cookies_of(cookie) if cookie else NO_COOKIES,
        client[0] if client else '',
        agent.decode('utf-8', 'surrogateescape') if agent else '', body,
        forwarded.decode('latin-1') if forwarded else ''))


class _Lazy(tuple):
    """A pages.http.Request whose fields are read from the ASGI scope only
    when a page reads one: /ugly and /about read none. For pages that never
    wait, on requests without a body. _Lazy((scope,)): a tuple, built in C."""
    __slots__ = ()

    def __getattr__(self, name):
        scope = self[0]
        cookie, agent, forwarded, _, _ = scan(scope['headers'])
        return getattr(request_of(scope, b'', cookie, agent, forwarded),
                       name)


async def read_body(receive, timeout):
    """The whole body, TOO_LARGE beyond MAX_BODY, SLOW when it is not all
    here `timeout` seconds after the head, None if the client left."""
    chunks, size = [], 0
    loop = asyncio.get_event_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            message = await asyncio.wait_for(receive(), deadline - loop.time())
        except asyncio.TimeoutError:
            return SLOW
        if message['type'] != 'http.request':
            return None
        chunk = message.get('body', b'')
        size += len(chunk)
        if size > MAX_BODY:
            return TOO_LARGE
        chunks.append(chunk)
        if not message.get('more_body'):
            return b''.join(chunks)


async def lifespan(receive, send):
    while True:
        message = await receive()
        kind = message['type'].rsplit('.', 1)[-1]
        await send({'type': 'lifespan.%s.complete' % kind})
        if kind == 'shutdown':
            return


def make_app(site, limits=None, every=True):
    """The ASGI 3 application serving site's routes, else the unrouted
    page (static files, 404). every: add Server and nosniff (false where
    the server adds them to every answer, its own ones too)."""
    routes = site.routes()
    exact, patterns = _table(site, routes)
    # The pages that never wait, with no path parameters: a request to one
    # without a body gets a _Lazy request.
    still, _ = _table(site, [r for r in routes if not r.waits])
    # Where edge.py cannot wrap the server (granian), the body time limit
    # is kept here.
    body_timeout = (limits or edge.LIMITS).body
    always = EVERY if every else []
    missing = unrouted(site)
    types = {}      # Content-Type -> bytes
    # id(Response) -> (Response, start message, body message, empty body
    # message): the pages answer many requests with one Response (/ugly,
    # /about, /stickers), whose messages are then built once. Bounded:
    # emptied when full.
    made = {}

    def messages(r, close=False):
        content_type = types.get(r.content_type)
        if content_type is None:
            content_type = types[r.content_type] = r.content_type.encode()
        headers = [(b'content-type', content_type),
                   (b'content-length', b'%d' % len(r.body))]
        headers += always
        for name, value in r.headers:
            headers.append((name.encode('latin-1'), value.encode('latin-1')))
        if close:
            headers.append(CLOSE)
        return (r, {'type': 'http.response.start', 'status': r.status,
                    'headers': headers},
                {'type': 'http.response.body', 'body': r.body}, EMPTY)

    async def app(scope, receive, send):
        if scope['type'] != 'http':
            if scope['type'] == 'lifespan':
                await lifespan(receive, send)
            return
        method, path = scope['method'], scope['path']
        head = method == 'HEAD'
        headers = scope['headers']
        handlers = still.get(path)
        handler = handlers.get(method) if handlers is not None else None
        if handler is not None:
            for name, _ in headers:     # a body announced: the whole way
                if name == b'content-length' or name == b'transfer-encoding':
                    handler = None
                    break
        if handler is not None:
            r = await handler(_Lazy((scope,)))
        else:
            cookie, agent, forwarded, length, chunked = scan(headers)
            body = b''
            if chunked is not None or (length is not None
                                       and length != b'0'):
                body = await bounded_body(receive, length, body_timeout)
                if body is None:    # the client left
                    return
                if not isinstance(body, bytes):     # refused
                    _, start, rest, empty = messages(body, close=True)
                    await send(start)
                    await send(empty if head else rest)
                    return
            request = request_of(scope, body, cookie, agent, forwarded)
            handlers = exact.get(path)     # route(), in line
            handler = handlers.get(method) if handlers is not None else None
            if handler is not None:
                r = await handler(request)
            else:
                handler, params = _match(patterns, method, path)
                r = await (handler or missing)(request, **params)
        found = made.get(id(r))
        if found is None or found[0] is not r:
            if len(made) >= 64:
                made.clear()
            found = made[id(r)] = messages(r)
        await send(found[1])
        await send(found[3] if head else found[2])
    return app


def _match(patterns, method, path):
    """(handler or None, path parameters) of a route with parameters."""
    for regex, handlers in patterns:
        match = regex.match(path)
        if match is not None and method in handlers:
            return handlers[method], match.groupdict()
    return None, {}


def header_text(value):
    """A header value a framework decoded as latin-1, as the pages take
    it: UTF-8 with undecodable bytes escaped."""
    return value.encode('latin-1').decode('utf-8', 'surrogateescape')


def route(exact, patterns, missing, method, path):
    """(handler, path parameters) of a request, from _table's tables;
    `missing` where no route matches."""
    handlers = exact.get(path)
    handler = handlers.get(method) if handlers is not None else None
    if handler is not None:
        return handler, NO_PARAMS
    handler, params = _match(patterns, method, path)
    return handler or missing, params


async def bounded_body(receive, length, timeout):
    """The request body, or the Response refusing it, or None (the
    client left); length: the Content-Length value (bytes or text), None
    without one."""
    if length is not None:
        if not length.isdigit():
            return BAD_LENGTH
        if len(length) > edge.MAX_DIGITS or int(length) > MAX_BODY:
            return TOO_LARGE
    return await read_body(receive, timeout)
