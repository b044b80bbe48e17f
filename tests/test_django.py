"""The Django adapter in-process, on Django's ASGI handler: what it does
that the other adapters' tests through HTTP do not show (the body bounded
before Django reads it, the pages' cookies in Django's cookie jar, the
405 of a method no page takes, the log of django.request)."""
import asyncio
import logging

import pytest

pytest.importorskip('django')    # not in the CPython 3.7 environment

from conftest import free_port  # noqa: E402
from data_interface.address import TarantoolAddress  # noqa: E402
from data_interface.tarantool.asynctnt_data import AsynctntData  # noqa: E402
from pages import Site  # noqa: E402
from pages.http import HTML, Response  # noqa: E402
from runtime import edge  # noqa: E402
from runtime.settings import DEFAULTS  # noqa: E402

import django_server  # noqa: E402
import django_settings as settings  # noqa: E402
from django_server import views  # noqa: E402

BALLOTS = b'win=' + b'a' * 22 + b'&lose=' + b'b' * 22


@pytest.fixture
def app():
    """The site's ASGI application, its database gone (a closed port)."""
    gone = TarantoolAddress('127.0.0.1', free_port(), 'sticker_app', 'x')
    site = Site(AsynctntData(gone, 'multi'), DEFAULTS)
    return django_server.make_app(site, edge.LIMITS._replace(body=0.3))


async def call(app, method, path, headers=(), chunks=(), stalled=False):
    """(status, {header: [values]}, body) of one request; chunks: the
    body's, stalled: a client that never sends it."""
    messages = [{'type': 'http.request', 'body': c, 'more_body': True}
                for c in chunks]
    if not stalled:
        messages.append({'type': 'http.request', 'body': b'',
                         'more_body': False})
    sent = []

    async def receive():
        if messages:
            return messages.pop(0)
        await asyncio.sleep(3600)       # a client that sends nothing more

    async def send(message):
        sent.append(message)

    scope = {'type': 'http', 'asgi': {'version': '3.0'},
             'http_version': '1.1', 'method': method, 'scheme': 'http',
             'path': path, 'raw_path': path.encode(), 'query_string': b'',
             'root_path': '', 'headers': [(k.lower(), v) for k, v in headers],
             'client': ('127.0.0.1', 5000), 'server': ('127.0.0.1', 80)}
    await asyncio.wait_for(app(scope, receive, send), 10)
    found = {}
    for name, value in sent[0]['headers']:
        found.setdefault(name.decode().lower(), []).append(value.decode())
    body = b''.join(m.get('body', b'') for m in sent[1:])
    return sent[0]['status'], found, body


async def test_a_long_body_is_refused_before_it_comes(app):
    status, headers, _ = await call(app, 'POST', '/', [
        (b'Content-Type', b'application/x-www-form-urlencoded'),
        (b'Content-Length', b'9000')], stalled=True)
    assert status == 413 and headers['connection'] == ['close']


async def test_a_slow_body_is_refused(app):
    status, headers, _ = await call(app, 'POST', '/', [
        (b'Content-Length', b'%d' % len(BALLOTS))], stalled=True)
    assert status == 408 and headers['connection'] == ['close']


async def test_a_body_that_grows_too_long_is_refused(app):
    status, _, _ = await call(app, 'POST', '/', [
        (b'Transfer-Encoding', b'chunked')], chunks=[b'x' * 5000] * 2)
    assert status == 413


async def test_a_chunked_vote_reaches_its_page_whole(app):
    # Two well-formed ballots: the page asks the database (gone), so 503;
    # a body cut short would be a 400.
    status, headers, body = await call(app, 'POST', '/', [
        (b'Content-Type', b'application/x-www-form-urlencoded'),
        (b'Transfer-Encoding', b'chunked')],
        chunks=[BALLOTS[:10], BALLOTS[10:]])
    assert status == 503, body
    assert headers['content-length'] == [str(len(body))]
    assert headers['retry-after'] == ['1']


async def test_pages_answer_with_their_length_and_head_too(app):
    status, headers, body = await call(app, 'GET', '/ugly')
    assert (status, body) == (200, b'UGLY')
    assert headers['content-length'] == ['4']
    assert headers['content-type'] == ['text/plain; charset=utf-8']
    assert (await call(app, 'HEAD', '/ugly'))[0] == 200
    assert (await call(app, 'GET', '/nowhere'))[0] == 404
    assert (await call(app, 'GET', '/packs/a/b/c'))[0] == 404


async def test_a_method_no_page_takes_is_djangos_405(app):
    status, headers, _ = await call(app, 'PUT', '/good')
    assert status == 405 and headers['allow'] == ['GET, HEAD']
    status, headers, _ = await call(app, 'DELETE', '/')
    assert status == 405 and headers['allow'] == ['GET, HEAD, POST']


async def test_every_cookie_of_a_page_is_sent():
    from django.core.handlers.asgi import ASGIHandler
    settings.configure()
    r = Response(200, HTML, b'<p>', (
        ('X-Frame-Options', 'DENY'),
        ('Set-Cookie', 'sid=a-b.c_d; Path=/; Max-Age=31536000; HttpOnly; '
                       'SameSite=Lax'),
        ('Set-Cookie', 'fresh=17.e-f; Path=/; Max-Age=11; HttpOnly; '
                       'SameSite=Lax')))
    sent = []

    async def send(message):
        sent.append(message)
    await ASGIHandler().send_response(views.answer(r), send)
    headers = [(k.decode().lower(), v.decode())
               for k, v in sent[0]['headers']]
    cookies = sorted(v for k, v in headers if k == 'set-cookie')
    assert len(cookies) == 2
    assert cookies[0].startswith('fresh=17.e-f;')
    assert cookies[1].startswith('sid=a-b.c_d;')
    for cookie in cookies:
        for part in ('Path=/', 'HttpOnly', 'SameSite=Lax', 'Max-Age='):
            assert part in cookie
    assert ('x-frame-options', 'DENY') in headers
    assert ('content-length', '3') in headers


def test_django_request_logs_only_what_a_view_raised():
    def record(level, exc_info=None):
        return logging.LogRecord('django.request', level, __file__, 1,
                                 'Service Unavailable: /good', (), exc_info)
    assert not settings.raised(record(logging.ERROR))
    assert not settings.raised(record(logging.WARNING))
    try:
        raise ValueError('a bug')
    except ValueError:
        import sys
        assert settings.raised(record(logging.ERROR, sys.exc_info()))
