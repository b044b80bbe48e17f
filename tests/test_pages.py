"""Each framework's adapter through real HTTP: status, headers, cookies and
bodies reach the visitor as the pages made them. What the pages say is
checked in-process, on every backend, by test_site.py."""
import asyncio
import os

import pytest
import yarl

from conftest import small_data_set, until
from bench.pagecheck import (APPLIED_WITHIN, all_stickers, ballots, cards,
                             client, session_cookie, vote_total)

from plugins.servers import one_of_each

# Every framework, on each database (both Redis modes, a Redis Cluster;
# PostgreSQL through SQLAlchemy's ORM on FastAPI), and the older aiohttp and
# sanic of the legacy environment; the pipelining and hostile-bytes tests use
# the same processes.
ENGINES = one_of_each(['aiohttp-tarantool-one', 'aiohttp-postgres-pool',
           'sanic-tarantool-one-uvloop', 'sanic-postgres-pool-uvloop',
           'japronto-tarantool-one', 'japronto-postgres-pool',
           'aiohttp-aiotarantool-multi', 'sanic-aiotarantool-one',
           'fastapi-tarantool-one-uvloop', 'fastapi-postgres-pool',
           'fastapi-sqlalchemy-pool',
           'uvicorn-tarantool-one-uvloop', 'uvicorn-postgres-pool',
           'granian-tarantool-one', 'granian-postgres-pool-uvloop',
           'socketify-tarantool-multi-uvloop', 'socketify-postgres-pool',
           'aiohttp-redis-one-uvloop', 'sanic-redis-pool-uvloop',
           'japronto-redis-one', 'fastapi-redis-pool', 'uvicorn-redis-one',
           'granian-redis-one-uvloop', 'socketify-redis-pool',
           'aiohttp-rediscluster-pool-uvloop', 'starlette-rediscluster-pool',
           'django-tarantool-one-uvloop', 'django-django-pool-uvloop',
           'aiohttp-django-pool'])


@pytest.fixture(scope='module', params=ENGINES)
def site(request, shared_server):
    return shared_server(request.param).url


async def fetch(url, cookie=None, form=None, headers=None):
    async with client(cookie) as s:
        method = s.post if form is not None else s.get
        async with method(url, data=form, headers=headers) as r:
            return r.status, r.headers, await r.read()


async def test_pages_reach_the_visitor_whole(site):
    status, headers, body = await fetch(site + '/')
    assert status == 200
    assert headers['Content-Type'] == 'text/html; charset=utf-8'
    assert headers['X-Frame-Options'] == 'DENY'
    assert headers['X-Content-Type-Options'] == 'nosniff'
    cookie = session_cookie(headers)
    assert cookie and 'HttpOnly' in headers['Set-Cookie']
    assert 'SameSite=Lax' in headers['Set-Cookie']
    assert len(headers.getall('Set-Cookie')) == 1
    assert int(headers['Content-Length']) == len(body)
    (_, win, lose), _ = ballots(body.decode())

    # The form body and the cookie reach the page.
    form = {'win': win, 'lose': lose}
    status, headers, body = await fetch(site + '/', cookie, form)
    assert status == 200 and 'Set-Cookie' not in headers
    assert 'Vote counted.' in body.decode()
    status, headers, body = await fetch(site + '/', cookie, form)
    assert status == 409 and 'already used' in body.decode()
    assert headers['Content-Type'] == 'text/html; charset=utf-8'

    status, headers, body = await fetch(site + '/good', cookie)
    assert status == 200 and 'Set-Cookie' not in headers
    assert len(cards(body.decode())) == 9
    status, headers, _ = await fetch(site + '/good', 'not-a-uuid')
    assert status == 200 and session_cookie(headers)
    # Its bare uuid is not a session the server issued: a new one.
    status, headers, _ = await fetch(site + '/good', cookie.split('.')[0])
    assert status == 200 and session_cookie(headers) not in (None, cookie)

    status, headers, body = await fetch(site + '/ugly')
    assert (status, body) == (200, b'UGLY')
    assert headers['Content-Type'] == 'text/plain; charset=utf-8'
    assert 'Set-Cookie' not in headers and 'X-Frame-Options' not in headers


async def test_forged_and_concurrent_votes_through_http(site):
    """A ballot posted by another visitor is refused; the same ballot posted
    at once on many connections counts once."""
    import asyncio
    status, headers, body = await fetch(site + '/')
    cookie = session_cookie(headers)
    (_, win, lose), _ = ballots(body.decode())
    form = {'win': win, 'lose': lose}
    other = session_cookie((await fetch(site + '/good'))[1])
    status, _, body = await fetch(site + '/', other, form)
    assert status == 409 and b'another visitor' in body
    # Its bare uuid, which the server did not sign, is no better.
    status, _, body = await fetch(site + '/', cookie.split('.')[0], form)
    assert status == 409 and b'another visitor' in body
    answers = await asyncio.gather(*[fetch(site + '/', cookie, form)
                                     for _ in range(8)])
    assert sorted(status for status, _, _ in answers) == [200] + [409] * 7


async def test_json_and_404_reach_the_visitor(site):
    expected = small_data_set()
    first = expected.stickers[0]
    status, headers, body = await fetch(site + '/stickers')
    assert status == 200
    assert headers['Content-Type'].startswith('application/json')
    assert b'"name"' in body
    status, headers, body = await fetch('%s/stickers/%s/%d' % (
        site, first.pack, first.id))
    assert status == 200 and first.image.encode() in body
    # Path parameters arrive decoded.
    status, headers, body = await fetch(site + '/stickers/%s/%%31' % first.pack)
    assert status == 200 and first.image.encode() in body
    status, headers, body = await fetch(site + '/stickers/no_such_pack')
    assert status == 404
    assert headers['Content-Type'].startswith('application/json')
    assert body == b'{"error": "no such pack"}'
    status, headers, body = await fetch(site + '/nope')
    assert (status, headers['Content-Type']) == (404, 'text/html; charset=utf-8')
    assert b'There is no page here' in body


async def test_pack_and_sticker_pages_answer_a_browser_in_html(site):
    expected = small_data_set()
    first = expected.stickers[0]
    status, headers, body = await fetch('%s/packs/%s' % (site, first.pack))
    assert (status, headers['Content-Type']) == (200, 'text/html; charset=utf-8')
    assert headers['X-Frame-Options'] == 'DENY' and session_cookie(headers)
    assert sorted(cards(body.decode())) == sorted(
        s.id for s in expected.stickers if s.pack == first.pack)
    # Path parameters arrive decoded, as the API's do.
    status, headers, body = await fetch('%s/packs/%s/%%31' % (site, first.pack))
    assert status == 200 and first.image.encode() in body
    assert b'No. ' in body and headers['Content-Type'].startswith('text/html')
    for path in ('/packs/no_such_pack', '/packs/%s/999999' % first.pack,
                 '/packs/%s/abc' % first.pack):
        status, headers, body = await fetch(site + path)
        assert (status, headers['Content-Type']) == (404, 'text/html; charset=utf-8')
        assert b'There is no such' in body
    # Programs keep the JSON API.
    status, headers, body = await fetch('%s/stickers/%s' % (site, first.pack))
    assert status == 200 and headers['Content-Type'].startswith('application/json')


async def test_hostile_headers_are_harmless(site):
    hostile = "'; DROP TABLE sessions; -- \u2603"
    status, headers, _ = await fetch(site + '/good', headers={
        'User-Agent': hostile, 'Cookie': 'sid=' + hostile})
    assert status == 200 and session_cookie(headers)
    cookie = session_cookie(headers)
    status, headers, _ = await fetch(site + '/good', cookie, headers={
        'User-Agent': 'x' * 8000})
    assert status == 200 and 'Set-Cookie' not in headers


async def test_body_over_8_kib_is_refused(site):
    cookie = session_cookie((await fetch(site + '/good'))[1])
    status, _, body = await fetch(site + '/', cookie, {
        'win': 'a' * 22, 'lose': 'b' * 22, 'pad': 'x' * 9000})
    assert status == 413


async def test_static_files(site):
    status, headers, body = await fetch(site + '/static/style.css')
    assert status == 200 and 'text/css' in headers['Content-Type']
    status, _, body = await fetch(site + '/favicon.ico')
    assert status == 200 and body[:4] == b'\0\0\1\0'
    image = small_data_set().stickers[0].image
    status, _, body = await fetch(site + image)
    assert status == 200 and body.startswith(b'<svg')


@pytest.mark.parametrize('path', [
    '/static/../server.py', '/static/%2e%2e/server.py',
    '/static/..%2fserver.py', '/img/%2e%2e/%2e%2e/server.py',
    '/static/%2e%2e%2f%2e%2e%2fetc/passwd',
])
async def test_path_traversal_is_refused(site, path):
    async with client() as s:
        async with s.get(yarl.URL(site + path, encoded=True)) as r:
            assert r.status in (403, 404)
            assert 'import' not in await r.text()


def test_engine_list_is_complete():
    assert os.path.exists(os.path.join(os.path.dirname(__file__), '..', 'server.py'))
    from runtime import engines
    assert set(ENGINES) <= set(engines.BY_NAME)


async def test_votes_count_once_and_forgeries_not_at_all(site, request):
    """Through each adapter: a forged or foreign ballot changes nothing, and
    one ballot posted many times at once counts exactly once."""
    if '-rediscluster-' in request.node.callspec.params['site']:
        # the votes of the tests before may still be on their way
        await asyncio.sleep(APPLIED_WITHIN)
    async with client() as s:
        before = vote_total(await all_stickers(s, site))
    status, headers, body = await fetch(site + '/')
    cookie = session_cookie(headers)
    (_, win, lose), _ = ballots(body.decode())
    forged = 'A' * 22
    assert (await fetch(site + '/', cookie, {'win': forged, 'lose': lose}))[0] \
        == 409
    # Another visitor's session.
    other = session_cookie((await fetch(site + '/good'))[1])
    assert (await fetch(site + '/', other, {'win': win, 'lose': lose}))[0] \
        == 409
    statuses = await asyncio.gather(*[
        fetch(site + '/', cookie, {'win': win, 'lose': lose})
        for _ in range(8)])
    assert sorted(s for s, _, _ in statuses) == [200] + [409] * 7

    async def total():
        async with client() as s:
            return vote_total(await all_stickers(s, site))
    # in the rankings when answered, or on a Redis Cluster a moment later
    moved = await until(lambda: total_moved(total, before), APPLIED_WITHIN)
    assert moved == before + 1


async def total_moved(total, before):
    now = await total()
    return now if now != before else None
