"""socketify adapter: the pages on uWebSockets (C++) through socketify's
native bindings, in server.py's own event loop (see drive.py).

A page that does not wait on the database (Route.waits false: /ugly, /about,
static files, 404) runs at once inside uWebSockets' request callback and is
answered there; the others run as asyncio tasks (drivers need a current
task). uWebSockets pipelines only what is answered in its callback: a request
that arrives behind one still waiting makes it close the connection (see
README).
"""
import asyncio
import functools
import logging
import math
import types
from http import HTTPStatus
from urllib.parse import unquote_to_bytes

from socketify import App
from socketify.native import ffi, lib, library_path

from runtime import edge
from pages import MAX_BODY, Request
from pages.http import EVERY, text_response
from pages.static import unrouted

from .drive import Driver

log = logging.getLogger('socketify_server')
unpack = ffi.unpack
# uSockets' own timeout of a socket (an HttpResponse is its socket), which
# socketify does not declare.
ffi.cdef("""
void us_socket_timeout(int ssl, uws_res_t *s, unsigned int seconds);
int us_socket_is_closed(int ssl, uws_res_t *s);
""")
us = ffi.dlopen(library_path)
# Seconds an idle keep-alive connection stays open; uWebSockets' own: 10.
keepalive = [10]
# uWebSockets keeps one loop per thread, on the libuv loop of the first App:
# a later App (tests) shares it, and no App may be freed while it lives.
_apps = []
SSL = ffi.cast('int', 0)
EXCLUSIVE_PORT = 1      # LIBUS_LISTEN_EXCLUSIVE_PORT: no SO_REUSEPORT
PHRASES = {s.value: s.phrase for s in HTTPStatus}
# (status, content type) -> the status line's text followed by the headers
# every answer carries: one call into uWebSockets instead of four.
_heads = {}


def _head(status, content_type):
    head = _heads.get((status, content_type))
    if head is None:
        head = _heads[status, content_type] = ''.join(
            ['%d %s' % (status, PHRASES.get(status, 'Unknown'))]
            + ['\r\n%s: %s' % kv for kv in EVERY]
            + ['\r\nContent-Type: ', content_type]).encode()
    return head


TOO_LARGE = text_response(413, 'Payload Too Large')
FAILED = text_response(500, 'Internal Server Error')


def _text(raw):
    return raw.decode('utf-8', 'surrogateescape')


def _path(raw):
    if b'%' in raw:
        raw = unquote_to_bytes(raw)
    return raw.decode('utf-8', 'replace')


def _cookies(header):
    cookies = {}
    for part in header.split(';'):
        name, _, value = part.strip().partition('=')
        if name and name not in cookies:
            cookies[name] = value.strip('"')
    return cookies


def _write(res, r, head, close):
    head_lines = _head(r.status, r.content_type)
    lib.uws_res_write_status(SSL, res, head_lines, len(head_lines))
    for key, value in r.headers:
        key, value = key.encode(), value.encode('latin-1', 'replace')
        lib.uws_res_write_header(SSL, res, key, len(key), value, len(value))
    if head:
        lib.uws_res_write_header_int(SSL, res, b'Content-Length', 14,
                                     len(r.body))
        lib.uws_res_end_without_body(SSL, res, close)
    else:
        lib.uws_res_end(SSL, res, r.body, len(r.body), close)
    # uWebSockets has just set its fixed idle timeout: ours instead.
    if not close and not us.us_socket_is_closed(SSL, res):
        us.us_socket_timeout(SSL, res, keepalive[0])


@types.coroutine
def _resume(coro, yielded):
    """Go on with a coroutine that already made its first step."""
    while True:
        try:
            value = yield yielded
        except BaseException as e:
            try:
                yielded = coro.throw(e)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                yielded = coro.send(value)
            except StopIteration as stop:
                return stop.value


class Exchange:
    """One request that waits: for its body or for its page."""
    __slots__ = ('server', 'res', 'head', 'handle', 'aborted', 'done',
                 'page', 'request', 'params', 'eager', 'chunks', 'size',
                 'answer', 'close')

    def __init__(self, server, res, head):
        self.server = server
        self.res = res
        self.head = head
        self.aborted = self.done = self.close = False
        self.handle = ffi.new_handle(self)
        server.pending[self] = None
        server.idle.clear()
        lib.uws_res_on_aborted(SSL, res, _on_aborted, self.handle)

    def read(self, page, request, params, eager):
        self.page, self.request, self.params = page, request, params
        self.eager = eager
        self.chunks, self.size = [], 0
        lib.uws_res_on_data(SSL, self.res, _on_data, self.handle)

    def data(self, chunk, end):
        if self.done or self.size > MAX_BODY:
            return
        self.size += len(chunk)
        if self.size > MAX_BODY:
            self.respond(TOO_LARGE, close=True)
            return
        self.chunks.append(chunk)
        if end:
            body = b''.join(self.chunks)
            self.chunks = None
            self.server.run(self.page, self.request._replace(body=body),
                            self.params, self.res, self.head, self.eager, self)

    def wait(self, coro, yielded=None):
        self.server.loop.create_task(self._finish(coro, yielded))

    async def _finish(self, coro, yielded):
        try:
            if yielded is None:
                r = await coro
            else:
                r = await _resume(coro, yielded)
        except Exception:
            log.exception('page failed')
            r = FAILED
        self.respond(r, corked=True)

    def respond(self, r, close=False, corked=False):
        if self.aborted or self.done:
            self.finished()
            return
        self.done = True
        self.answer = r
        self.close = close
        if corked:
            # Outside libuv's callbacks: a write that must wait for the
            # socket, or a close, needs a libuv turn.
            lib.uws_res_cork(SSL, self.res, _on_cork, self.handle)
            if close or self.server.driver.pending():
                self.server.driver.kick()
        else:
            _write(self.res, r, self.head, close)
        self.finished()

    def finished(self):
        self.server.pending.pop(self, None)
        if not self.server.pending:
            self.server.idle.set()


@ffi.callback('void(uws_res_t *, void *)')
def _on_aborted(res, handle):
    exchange = ffi.from_handle(handle)
    exchange.aborted = True
    exchange.finished()


@ffi.callback('void(uws_res_t *, const char *, size_t, bool, void *)')
def _on_data(res, chunk, length, end, handle):
    exchange = ffi.from_handle(handle)
    try:
        exchange.data(ffi.unpack(chunk, length) if length else b'', end)
    except Exception:
        log.exception('reading a body failed')


@ffi.callback('void(uws_res_t *, void *)')
def _on_cork(res, handle):
    exchange = ffi.from_handle(handle)
    _write(res, exchange.answer, exchange.head, exchange.close)


@ffi.callback('void(uws_res_t *, uws_req_t *, void *)')
def _on_request(res, req, handle):
    try:
        ffi.from_handle(handle)(res, req)
    except Exception:
        log.exception('request failed')
        _write(res, FAILED, False, True)


class Server:
    def __init__(self, loop):
        self.loop = loop
        self.pending = {}       # Exchange -> None: requests not answered yet
        self.idle = asyncio.Event()
        self.idle.set()
        self.handles = []       # kept alive as long as uWebSockets uses them
        self.driver = None
        self.buf = ffi.new('char **')

    def route(self, app, method, path, page, eager, body=False):
        names = []
        parts = []
        for part in path.split('/'):
            if part.startswith('{'):
                names.append(part[1:-1])
                part = ':' + part[1:-1]
            parts.append(part)
        pattern = '/'.join(parts).encode()
        head = method == 'HEAD'
        known = None if method == 'ANY' else method

        handle = ffi.new_handle(functools.partial(
            self.request, known, page, names, head, eager, body))
        self.handles.append(handle)
        add = {'GET': lib.uws_app_get, 'HEAD': lib.uws_app_head,
               'POST': lib.uws_app_post, 'ANY': lib.uws_app_any}[method]
        add(SSL, app, pattern, _on_request, handle)

    def _header(self, req, name):
        buf = self.buf
        length = lib.uws_req_get_header(req, name, len(name), buf)
        return unpack(buf[0], length) if length else b''

    def request(self, method, page, names, head, eager, body, res, req):
        buf = self.buf
        if method is None:
            n = lib.uws_req_get_case_sensitive_method(req, buf)
            method = _text(unpack(buf[0], n))
            head = method == 'HEAD'
        params = {}
        for i, name in enumerate(names):
            n = lib.uws_req_get_parameter(req, i, buf)
            params[name] = _path(unpack(buf[0], n) if n else b'')
        n = lib.uws_req_get_url(req, buf)
        path = _path(unpack(buf[0], n))
        n = lib.uws_res_get_remote_address_as_text(SSL, res, buf)
        ip = unpack(buf[0], n).decode('ascii', 'replace')
        cookie = self._header(req, b'cookie')
        request = Request(method, path,
                          _cookies(_text(cookie)) if cookie else {}, ip,
                          _text(self._header(req, b'user-agent')), b'',
                          _text(self._header(req, b'x-forwarded-for')))
        if body:
            length = self._header(req, b'content-length')
            exchange = Exchange(self, res, head)
            if length.isdigit() and (len(length) > edge.MAX_DIGITS
                                     or int(length) > MAX_BODY):
                exchange.respond(TOO_LARGE, close=True)
            else:
                exchange.read(page, request, params, eager)
            return
        self.run(page, request, params, res, head, eager)

    def run(self, page, request, params, res, head, eager, exchange=None):
        """Run an eager page up to its first wait: answer now if it has
        none; any other in a task."""
        coro = page(request, **params)
        if not eager:
            (exchange or Exchange(self, res, head)).wait(coro)
            return
        try:
            yielded = coro.send(None)
        except StopIteration as stop:
            r = stop.value
        except Exception:
            log.exception('page failed')
            r = FAILED
        else:
            (exchange or Exchange(self, res, head)).wait(coro, yielded)
            return
        if exchange is None:
            _write(res, r, head, False)
        else:
            exchange.respond(r)


def make_app(site, server):
    """The App with every page; restores what socketify's Loop changed on
    the running loop."""
    loop = server.loop
    factory = loop.get_task_factory()
    handler = loop.get_exception_handler()
    app = App()
    _apps.append(app)
    loop.set_task_factory(factory)
    loop.set_exception_handler(handler)
    for route in site.routes():
        eager = not route.waits
        server.route(app.app, route.method, route.path, route.handler, eager,
                     body=route.method == 'POST')
        if route.method == 'GET':
            server.route(app.app, 'HEAD', route.path, route.handler, eager)
    server.route(app.app, 'ANY', '/*', unrouted(site), True)
    return app


async def serve(site, host, port, stopped, limits=edge.LIMITS):
    """Serve until the `stopped` event is set, then finish pending requests."""
    loop = asyncio.get_running_loop()
    keepalive[0] = max(1, int(math.ceil(limits.keepalive)))
    server = Server(loop)
    app = make_app(site, server)
    listening = []

    @ffi.callback('void(struct us_listen_socket_t *, '
                  'uws_app_listen_config_t, void *)')
    def on_listen(socket, config, data):
        listening.append(socket)

    config = ffi.new('uws_app_listen_config_t *')
    host_bytes = ffi.new('char[]', host.encode())
    config.port = port
    config.host = host_bytes
    reuse = limits.reuse_port
    config.options = 0 if reuse else EXCLUSIVE_PORT
    lib.uws_app_listen_with_config(SSL, app.app, config[0], on_listen,
                                   ffi.NULL)
    if not listening or listening[0] == ffi.NULL:
        raise OSError('cannot listen on %s:%d' % (host, port))
    server.driver = Driver(loop, _apps[0].loop.get_native_loop())
    try:
        await stopped.wait()
    finally:
        lib.us_listen_socket_close(SSL, listening[0])
        server.driver.run()
        try:
            await asyncio.wait_for(server.idle.wait(), 10.0)
        except asyncio.TimeoutError:
            log.warning('%d requests still pending', len(server.pending))
        server.driver.close()
