"""The FastAPI adapter in process: what a page gets from a request, the body
limit, and the listening socket."""
import asyncio
import socket

import pytest

pytest.importorskip('fastapi')

from runtime import edge  # noqa: E402
import fastapi_server  # noqa: E402
from uvicorn_server import serve_app  # noqa: E402
from pages import MAX_BODY  # noqa: E402
from pages.http import Route, text_response  # noqa: E402
from plugins.waiting import until  # noqa: E402
from runtime.processes import answers  # noqa: E402


class Site:
    """Pages that record what they were given."""
    static, favicon = (), ''     # no static files

    def __init__(self):
        self.seen = []

    def routes(self):
        async def page(request, **params):
            self.seen.append((request, params))
            return text_response(200, 'ok')
        return [Route('GET', '/good', page, 'html', True),
                Route('POST', '/', page, 'html', True),
                Route('GET', '/stickers/{pack}/{sticker_id}', page, 'json',
                      True)]

    async def not_found(self, request):
        self.seen.append((request, {}))
        return text_response(404, 'nope')


async def call(app, method, path, headers=(), chunks=(b'',)):
    """(status, headers, body) of one request through the ASGI app."""
    scope = {'type': 'http', 'asgi': {'version': '3.0'}, 'http_version': '1.1',
             'method': method, 'path': path, 'raw_path': path.encode(),
             'query_string': b'', 'root_path': '', 'scheme': 'http',
             'server': ('127.0.0.1', 80), 'client': ('10.0.0.7', 5000),
             'headers': list(headers), 'state': {}}
    last = len(chunks) - 1
    messages = [{'type': 'http.request', 'body': c, 'more_body': i < last}
                for i, c in enumerate(chunks)]
    sent = []

    async def receive():
        return messages.pop(0) if messages else {'type': 'http.disconnect'}

    async def send(message):
        sent.append(message)
    await app(scope, receive, send)
    return (sent[0]['status'], dict(sent[0]['headers']),
            b''.join(m.get('body', b'') for m in sent[1:]))


async def test_a_page_gets_the_request_as_sent():
    site = Site()
    app = fastapi_server.make_app(site)
    status, headers, body = await call(app, 'POST', '/', [
        (b'cookie', b'sid=abc; other=1'),
        (b'user-agent', b'\xe2\x98\x83 \xff'),
        (b'content-length', b'12')], [b'win=', b'a&lose=b'])
    assert (status, body) == (200, b'ok')
    assert headers[b'content-type'] == b'text/plain; charset=utf-8'
    [(request, params)] = site.seen
    assert request.method == 'POST' and request.path == '/'
    assert request.cookies == {'sid': 'abc', 'other': '1'}
    assert request.ip == '10.0.0.7'
    assert request.user_agent == '\u2603 \udcff'
    assert request.body == b'win=a&lose=b' and params == {}


async def test_path_parameters_and_the_unrouted_page():
    site = Site()
    app = fastapi_server.make_app(site)
    assert (await call(app, 'GET', '/stickers/cats/12'))[0] == 200
    assert site.seen[-1][1] == {'pack': 'cats', 'sticker_id': '12'}
    for method in ('GET', 'HEAD'):
        status, _, _ = await call(app, method, '/stickers/cats/12/more')
        assert status == 404
        assert site.seen[-1][0].path == '/stickers/cats/12/more'
    status, _, body = await call(app, 'DELETE', '/good')
    assert status == 405 and body


@pytest.mark.parametrize('headers, chunks', [
    ([(b'content-length', b'%d' % (MAX_BODY + 1))], [b'x' * (MAX_BODY + 1)]),
    # No length: counted as it comes.
    ([], [b'x' * 4096] * 3),
])
async def test_a_body_over_the_limit_never_reaches_the_page(headers, chunks):
    site = Site()
    app = fastapi_server.make_app(site)
    status, _, body = await call(app, 'POST', '/', headers, chunks)
    assert status == 413 and body
    assert site.seen == []
    status, _, _ = await call(app, 'POST', '/', [], [b'x' * MAX_BODY])
    assert status == 200 and len(site.seen[0][0].body) == MAX_BODY


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@pytest.mark.server
async def test_reuse_port_lets_two_servers_share_a_port():
    port = free_port()
    stopped = asyncio.Event()
    sites = [Site(), Site()]
    shared = edge.LIMITS._replace(reuse_port=True)
    servers = [asyncio.ensure_future(serve_app(
        fastapi_server.make_app(site), '127.0.0.1', port, stopped, shared))
        for site in sites]

    async def both_serve():     # the kernel spreads new connections
        answer = await exchange(port, b'GET /good HTTP/1.1\r\nHost: t\r\n'
                                b'Connection: close\r\n\r\n')
        assert answer.startswith(b'HTTP/1.1 200 '), answer
        return all(site.seen for site in sites)
    await until(lambda: answers('127.0.0.1', port), 10, 0.02)
    await until(both_serve, 10, 0)
    assert not any(s.done() for s in servers)
    # Without the option the port is taken.
    with pytest.raises(OSError):
        await serve_app(fastapi_server.make_app(Site()), '127.0.0.1', port,
                        stopped, edge.LIMITS._replace(reuse_port=False))
    stopped.set()
    await asyncio.wait_for(asyncio.gather(*servers), 10)


async def exchange(port, data):
    reader, writer = await asyncio.open_connection('127.0.0.1', port)
    writer.write(data)
    answer = await reader.read()
    writer.close()
    return answer


@pytest.mark.server
async def test_served_answers_name_no_version_and_limit_heads(caplog):
    site = Site()
    port = free_port()
    stopped = asyncio.Event()
    server = asyncio.ensure_future(serve_app(
        fastapi_server.make_app(site), '127.0.0.1', port, stopped))
    await until(lambda: answers('127.0.0.1', port), 10, 0.02)
    try:
        good = await exchange(port, b'GET /good HTTP/1.1\r\nHost: t\r\n'
                              b'X-Forwarded-For: 1.2.3.4\r\n'
                              b'Connection: close\r\n\r\n')
        bad = await exchange(port, b'GET /\xff HTTP/1.1\r\nHost: t\r\n\r\n')
        # httptools has no limit of its own: edge refuses it (431).
        big = await exchange(port, b'GET /good HTTP/1.1\r\nX-Big: '
                             + b'a' * edge.MAX_HEAD + b'\r\n\r\n')
    finally:
        stopped.set()
        await asyncio.wait_for(server, 10)
    assert good.startswith(b'HTTP/1.1 200 ') and good.endswith(b'ok')
    assert site.seen[0][0].ip == '127.0.0.1'
    assert bad.startswith(b'HTTP/1.1 400 ')
    assert big.startswith(b'HTTP/1.1 431 ')
    assert len(site.seen) == 1
    # No log line per malformed request.
    assert not [r for r in caplog.records if r.name.startswith('uvicorn')]
    for answer in (good, bad, big):
        head = answer.split(b'\r\n\r\n')[0].lower()
        assert b'\r\nserver: stickers\r\n' in head + b'\r\n'
        assert b'\r\nx-content-type-options: nosniff\r\n' in head + b'\r\n'
