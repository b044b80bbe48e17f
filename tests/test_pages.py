"""Every page on every engine, content checked, through real HTTP."""
import asyncio
import os
import secrets
import uuid

import pytest
import yarl

from conftest import TEST_PACKS, engine_args
from bench.pagecheck import all_stickers, ballots, cards, client, ranked, stat

import dataset

TARANTOOL_ENGINES = [
    '%s-tarantool-%s%s' % (f, m, l)
    for f in ('aiohttp', 'sanic') for m in ('one', 'multi')
    for l in ('', '-uvloop')]
POSTGRES_ENGINES = [
    '%s-postgres-pool%s' % (f, l)
    for f in ('aiohttp', 'sanic', 'japronto') for l in ('', '-uvloop')]
# Run by server.py in the legacy environment (.venv37), skipped without it.
LEGACY_ENGINES = [
    '%s-%s-%s%s' % (f, d, m, l)
    for f, d in (('japronto', 'tarantool'), ('japronto', 'aiotarantool'),
                 ('aiohttp', 'aiotarantool'), ('sanic', 'aiotarantool'))
    for m in ('one', 'multi') for l in ('', '-uvloop')]
ENGINES = TARANTOOL_ENGINES + POSTGRES_ENGINES + LEGACY_ENGINES


@pytest.fixture(scope='module', params=ENGINES)
def site(request, start_server):
    server = start_server(request.param, *engine_args(request, request.param))
    return server.url


async def get(url, cookie=None):
    async with client(cookie) as s:
        async with s.get(url) as r:
            return r.status, r.headers, await r.text()


async def post_vote(url, cookie, win, lose, extra=None):
    form = {'win': win, 'lose': lose}
    form.update(extra or {})
    async with client(cookie) as s:
        async with s.post(url + '/', data=form) as r:
            return r.status, await r.text()


async def new_ballots(site):
    status, headers, html = await get(site + '/')
    assert status == 200
    cookie = headers['Set-Cookie'].split(';')[0].split('=', 1)[1]
    return cookie, ballots(html)


async def sticker(site, sticker_id):
    async with client() as s:
        for item in await all_stickers(s, site):
            if item['id'] == sticker_id:
                return item


async def test_ugly(site):
    status, headers, body = await get(site + '/ugly')
    assert (status, body) == (200, 'UGLY')
    assert headers['Content-Type'].startswith('text/plain')
    assert 'Set-Cookie' not in headers


async def test_index_offers_two_stickers_and_a_session(site):
    status, headers, html = await get(site + '/')
    assert status == 200
    assert headers['Content-Type'].startswith('text/html')
    cookie = headers['Set-Cookie']
    assert cookie.startswith('sid=')
    assert 'HttpOnly' in cookie and 'SameSite=Lax' in cookie
    uuid.UUID(cookie.split(';')[0][4:])
    (a, win_a, lose_a), (b, win_b, lose_b) = ballots(html)
    assert a != b
    assert (win_a, lose_a) == (lose_b, win_b)
    assert 'action="/"' in html and '<nav' in html


async def test_returning_visitor_keeps_session(site):
    cookie = str(uuid.uuid4())
    status, headers, _ = await get(site + '/good', cookie)
    assert status == 200 and 'Set-Cookie' not in headers
    status, headers, _ = await get(site + '/good', 'not-a-uuid')
    assert status == 200 and headers['Set-Cookie'].startswith('sid=')


async def test_vote_moves_ratings(site):
    cookie, ((a, win, lose), (b, _, _)) = await new_ballots(site)
    before_a, before_b = await sticker(site, a), await sticker(site, b)
    status, html = await post_vote(site, cookie, win, lose)
    assert status == 200
    assert 'Vote counted' in html
    assert len(ballots(html)) == 2
    after_a, after_b = await sticker(site, a), await sticker(site, b)
    assert after_a['rating'] == before_a['rating'] + 1
    assert after_a['votes_plus'] == before_a['votes_plus'] + 1
    assert after_b['rating'] == before_b['rating'] - 1
    assert after_b['votes_minus'] == before_b['votes_minus'] + 1
    # The same ballots again: refused, nothing moves.
    status, html = await post_vote(site, cookie, win, lose)
    assert status == 409 and 'already used' in html
    assert await sticker(site, a) == after_a


@pytest.mark.parametrize('form, status', [
    ({}, 400),
    ({'win': 'x'}, 400),
    ({'win': 'a' * 22, 'lose': 'a' * 22}, 400),
    ({'win': 'a' * 22, 'lose': 'b' * 22}, 409),
    ({'win': "'; DROP TABLE x; --", 'lose': '\x00' * 22}, 400),
])
async def test_bad_ballots(site, form, status):
    async with client(str(uuid.uuid4())) as s:
        async with s.post(site + '/', data=form) as r:
            assert r.status == status
            assert 'ballot' in (await r.text())


async def test_foreign_and_unpaired_ballots(site):
    cookie, ((a, win, lose), _) = await new_ballots(site)
    _, ((_, win2, lose2), _) = await new_ballots(site)
    before = await sticker(site, a)
    assert (await post_vote(site, str(uuid.uuid4()), win, lose))[0] == 409
    assert (await post_vote(site, None, win, lose))[0] == 409
    assert (await post_vote(site, cookie, win, lose2))[0] == 400
    assert await sticker(site, a) == before
    assert (await post_vote(site, cookie, win, lose))[0] == 200


async def test_body_over_8_kib_is_refused(site):
    cookie, ((_, win, lose), _) = await new_ballots(site)
    status, _ = await post_vote(site, cookie, win, lose, {'pad': 'x' * 9000})
    assert status == 413
    assert (await post_vote(site, cookie, win, lose))[0] == 200


async def test_concurrent_double_post_counts_once(site):
    cookie, ((a, win, lose), _) = await new_ballots(site)
    before = await sticker(site, a)
    results = await asyncio.gather(*[
        post_vote(site, cookie, win, lose) for _ in range(6)])
    statuses = sorted(status for status, _ in results)
    assert statuses == [200, 409, 409, 409, 409, 409]
    assert (await sticker(site, a))['rating'] == before['rating'] + 1


@pytest.mark.parametrize('page, best', [('/good', True), ('/bad', False)])
async def test_ranked_pages(site, page, best):
    async with client() as s:
        expected = ranked(await all_stickers(s, site), best)
    status, headers, html = await get(site + page)
    assert status == 200
    assert cards(html) == expected
    assert 'Set-Cookie' in headers
    assert ('The best 9' if best else 'The worst 9') in html


async def test_about_shows_counts(site):
    status, _, html = await get(site + '/about')
    assert status == 200
    expected = dataset.generate(packs=TEST_PACKS)
    assert stat(html, 'packs') == len(expected.packs)
    assert stat(html, 'stickers') == len(expected.stickers)
    for name in ('users', 'views', 'votes'):
        assert stat(html, name) >= 0
    assert 'aria-current="page"' in html


async def test_json_api(site):
    expected = dataset.generate(packs=TEST_PACKS)
    first = expected.stickers[0]
    async with client() as s:
        async with s.get(site + '/stickers') as r:
            assert r.status == 200
            packs = await r.json()
        assert sorted(p['name'] for p in packs) == sorted(
            p.name for p in expected.packs)
        async with s.get('%s/stickers/%s' % (site, first.pack)) as r:
            pack = await r.json()
            assert pack['stickers'][0]['image'] == first.image
        async with s.get('%s/stickers/%s/%d' % (site, first.pack, first.id)) as r:
            assert r.status == 200
            assert (await r.json())['id'] == first.id


@pytest.mark.parametrize('path', [
    '/stickers/no_such_pack', '/stickers/no_such_pack/1',
    '/stickers/%s/999999', '/stickers/%s/abc', '/stickers/%s/%%C2%%B2',
    "/stickers/'%%3B%%20DROP%%20TABLE%%20stickers", '/stickers/%s/-1',
])
async def test_json_api_misses_are_404_json(site, path):
    pack = dataset.generate(packs=TEST_PACKS).packs[0].name
    if '%s' in path:
        path = path % pack
    async with client() as s:
        async with s.get(site + path) as r:
            assert r.status == 404
            assert 'error' in await r.json()


async def test_static_files(site):
    async with client() as s:
        async with s.get(site + '/static/style.css') as r:
            assert r.status == 200 and 'text/css' in r.headers['Content-Type']
        async with s.get(site + '/favicon.ico') as r:
            assert r.status == 200 and (await r.read())[:4] == b'\0\0\1\0'
        sticker_image = dataset.generate(packs=TEST_PACKS).stickers[0].image
        async with s.get(site + sticker_image) as r:
            assert r.status == 200 and (await r.text()).startswith('<svg')


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


async def test_unknown_page_is_404(site):
    status, _, html = await get(site + '/nope')
    assert status == 404 and 'There is no page here' in html


async def test_hostile_headers_are_harmless(site):
    hostile = "'; DROP TABLE sessions; -- \u2603"
    async with client() as s:
        async with s.get(site + '/good', headers={
                'User-Agent': hostile, 'Cookie': 'sid=' + hostile}) as r:
            assert r.status == 200
    async with client() as s:
        async with s.get(site + '/good', headers={
                'User-Agent': secrets.token_hex(4000)}) as r:
            assert r.status == 200
    status, _, html = await get(site + '/about')
    assert stat(html, 'stickers') == len(dataset.generate(packs=TEST_PACKS).stickers)


def test_engine_list_is_complete():
    assert os.path.exists(os.path.join(os.path.dirname(__file__), '..', 'server.py'))
    import engines
    assert set(ENGINES) <= set(engines.BY_NAME)
