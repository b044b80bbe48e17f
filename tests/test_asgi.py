"""The bare ASGI application (asgi_server) called directly: routing, HEAD,
cookies, the body's size and time limits. Through real HTTP and the
databases it is tested with the other engines (test_pages.py and on)."""
import asyncio
import socket

import pytest

from runtime import edge
from asgi_server import make_app, parse_cookies
from pages import MAX_BODY, Route
from pages.http import Request, text_response


class Pages:
    """Pages that answer what they were given."""
    static, favicon = (), ''     # no static files

    def routes(self):
        return [Route('GET', '/', self.echo, 'html', True),
                Route('POST', '/', self.echo, 'html', True),
                Route('GET', '/stickers/{pack}', self.echo, 'json', True),
                Route('GET', '/stickers/{pack}/{sticker}', self.echo,
                      'json', True),
                Route('GET', '/fields', self.fields, 'html', True),
                Route('GET', '/still', self.fields, 'html', False)]

    async def echo(self, request, **params):
        return text_response(200, repr((request.method, request.path,
                                        sorted(request.cookies.items()),
                                        request.user_agent, request.body,
                                        sorted(params.items()))))

    async def fields(self, request):
        return text_response(200, repr(tuple(
            getattr(request, name) for name in Request._fields[2:])))

    async def not_found(self, request, **params):
        return text_response(404, 'none: ' + request.method)


async def call(app, method, path, headers=(), chunks=(b'',), delay=0):
    """(status, headers dict, body) of one request; the body comes in
    `chunks`, `delay` seconds apart."""
    sent = []
    parts = list(chunks)

    async def receive():
        if not parts:
            await asyncio.sleep(3600)
        await asyncio.sleep(delay)
        chunk = parts.pop(0)
        return {'type': 'http.request', 'body': chunk, 'more_body': bool(parts)}

    async def send(message):
        sent.append(message)
    await app({'type': 'http', 'method': method, 'path': path,
               'headers': list(headers), 'client': ('10.0.0.1', 1234)},
              receive, send)
    start, body = sent
    return start['status'], dict(start['headers']), body['body']


@pytest.fixture
def app():
    return make_app(Pages(), edge.LIMITS._replace(body=0.3))


async def test_routes_parameters_and_head(app):
    status, headers, body = await call(app, 'GET', '/stickers/abc/%31',
                                       [(b'user-agent', b'ua \xe2\x98\x83')])
    assert status == 200
    assert body == repr(('GET', '/stickers/abc/%31', [], 'ua \u2603', b'',
                         [('pack', 'abc'), ('sticker', '%31')])).encode()
    assert headers[b'server'] == b'stickers'
    assert headers[b'x-content-type-options'] == b'nosniff'
    assert headers[b'content-length'] == b'%d' % len(body)
    h_status, h_headers, h_body = await call(app, 'HEAD', '/stickers/abc')
    g_status, g_headers, g_body = await call(app, 'GET', '/stickers/abc')
    # The echo names the method: a HEAD's body would be one byte longer.
    assert (h_status, set(h_headers), h_body) == (g_status, set(g_headers),
                                                  b'')
    assert int(h_headers[b'content-length']) == len(g_body) + 1
    for method, path in [('DELETE', '/'), ('GET', '/stickers/a/b/c'),
                         ('POST', '/stickers/a'), ('GET', '/stickers/')]:
        status, _, body = await call(app, method, path)
        assert (status, body) == (404, b'none: ' + method.encode())


async def test_a_page_that_never_waits_reads_the_same_fields(app):
    """Its request's fields are read only when it reads them (a _Lazy
    request), and are those of any other page; with a body, it gets the
    whole request."""
    headers = [(b'cookie', b'sid=1'), (b'user-agent', b'ua \xe2\x98\x83'),
               (b'cookie', b'x=2'), (b'x-forwarded-for', b'10.9.9.9')]
    _, _, waits = await call(app, 'GET', '/fields', headers)
    status, _, still = await call(app, 'GET', '/still', headers)
    assert status == 200 and still == waits
    assert still == repr(({'sid': '1', 'x': '2'}, '10.0.0.1', 'ua \u2603',
                          b'', '10.9.9.9')).encode()
    status, _, body = await call(
        app, 'GET', '/still', headers + [(b'content-length', b'3')], [b'abc'])
    assert status == 200 and b"b'abc'" in body and b'10.9.9.9' in body
    status, sent, _ = await call(
        app, 'GET', '/still', [(b'transfer-encoding', b'chunked')],
        [b'x' * 5000] * 2)
    assert status == 413 and sent[b'connection'] == b'close'


def test_cookies_are_parsed_leniently():
    assert parse_cookies(b'sid=abc; a=b;sid=x; bad; =v; c=; d = e ') == {
        'sid': 'abc', 'a': 'b', 'c': '', 'd': 'e'}
    assert parse_cookies(b'sid=\xff\x00;;;') == {'sid': '\xff\x00'}


async def test_cookies_and_body_reach_the_page(app):
    status, _, body = await call(
        app, 'POST', '/', [(b'cookie', b'sid=1'), (b'cookie', b'x=2'),
                           (b'content-length', b'7')], [b'win', b'=abc'])
    assert status == 200
    assert b"[('sid', '1'), ('x', '2')], '', b'win=abc'" in body


@pytest.mark.parametrize('headers, chunks, status', [
    ([(b'content-length', b'%d' % (MAX_BODY + 1))], [b''], 413),
    ([(b'transfer-encoding', b'chunked')], [b'x' * 5000] * 2, 413),
    ([(b'content-length', b'-1')], [b''], 400),
    ([(b'content-length', b'1e3')], [b''], 400),
])
async def test_bodies_out_of_bounds_are_refused(app, headers, chunks, status):
    got, sent, _ = await call(app, 'POST', '/', headers, chunks)
    assert got == status
    assert sent[b'connection'] == b'close'


async def test_a_slow_body_gets_408(app):
    status, headers, _ = await call(
        app, 'POST', '/', [(b'content-length', b'10')],
        [b'a', b'b', b'c', b'd'], delay=0.15)
    assert status == 408 and headers[b'connection'] == b'close'


async def test_lifespan_completes(app):
    messages = [{'type': 'lifespan.startup'}, {'type': 'lifespan.shutdown'}]
    sent = []

    async def receive():
        return messages.pop(0)

    async def send(message):
        sent.append(message['type'])
    await asyncio.wait_for(app({'type': 'lifespan'}, receive, send), 5)
    assert sent == ['lifespan.startup.complete', 'lifespan.shutdown.complete']


def test_listening_sockets_share_a_port_only_when_asked():
    first = edge.listening_socket('127.0.0.1', 0, reuse_port=True)
    port = first.getsockname()[1]
    try:
        second = edge.listening_socket('127.0.0.1', port, reuse_port=True)
        second.close()
        with pytest.raises(OSError):
            edge.listening_socket('127.0.0.1', port)
    finally:
        first.close()
    assert isinstance(first, socket.socket)
