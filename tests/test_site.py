"""Every page's content and rules, pages.Site called in-process over each
backend's DataInterface on the real test databases: no server, no HTTP."""
import asyncio
import json
import re
import uuid
from dataclasses import replace

import pytest

import dataset
from data_interface import DataUnavailable, Visit, VoteOutcome, VoteUnknown
from bench.pagecheck import ballots, cards, ranked, stat
from conftest import TEST_PACKS, tarantool_address, until
from data_interface.tarantool.asynctnt_data import AsynctntData
from pages import Request, Site
from pages.http import FRAMING, HTML, JSON, TEXT
from pages.static import unrouted
from runtime.databases.load import write_images
from runtime.settings import DEFAULTS

EXPECTED = dataset.generate(packs=TEST_PACKS)
FORM = 'win=%s&lose=%s'


def route(site, method, path):
    """(handler, path parameters) the way adapters route a request."""
    for r in site.routes():
        regex = '^%s$' % re.sub(r'\{(\w+)\}', r'(?P<\1>[^/]+)', r.path)
        found = re.match(regex, path)
        if r.method == method and found:
            return r.handler, found.groupdict()
    return unrouted(site), {}


async def call(site, method, path, cookie=None, body=b'', ip='127.0.0.1',
               user_agent='pytest', forwarded='', fresh=None):
    """The one way these tests ask a page: a neutral Request for a decoded
    path, as an adapter builds it; returns the page's Response. fresh: the
    value of a cookie `fresh` (read replicas)."""
    page, params = route(site, method, path)
    cookies = {} if cookie is None else {'sid': cookie}
    if fresh is not None:
        cookies['fresh'] = fresh
    return await page(Request(method, path, cookies, ip, user_agent, body,
                              forwarded), **params)


async def get(site, path, cookie=None, **kwargs):
    """kwargs: ip, user_agent, forwarded (the X-Forwarded-For header)."""
    return await call(site, 'GET', path, cookie, **kwargs)


async def vote(site, cookie, win, lose, **kwargs):
    body = (FORM % (win, lose)).encode()
    return await call(site, 'POST', '/', cookie, body, **kwargs)


def text(response):
    return response.body.decode('utf-8')


def headers(response):
    return dict(response.headers)


def new_sid(response):
    """The session cookie a response's Set-Cookie starts, or None."""
    m = re.match(r'sid=([^;]*);', headers(response).get('Set-Cookie', ''))
    return m and m.group(1)


def session_in(cookie):
    """The session uuid a valid cookie stands for (pages.sessions)."""
    return cookie.split('.')[0]


async def issued(site, ip='127.0.0.1'):
    """A session cookie the site issued."""
    r = await get(site, '/good', ip=ip)
    assert r.status == 200 and new_sid(r)
    return new_sid(r)


async def new_ballots(site):
    r = await get(site, '/')
    assert r.status == 200
    return new_sid(r), ballots(text(r))


async def all_stickers(site):
    """Every sticker, through the JSON API pages."""
    result = []
    for p in json.loads((await get(site, '/stickers')).body):
        result.extend(json.loads((await get(site, p['url'])).body)['stickers'])
    return result


async def sticker(site, sticker_id):
    for s in await all_stickers(site):
        if s['id'] == sticker_id:
            return s


def new_site(data, limits=('0', '0', '0'), proxies=()):
    """The one way these tests make a Site. No background refresh during a
    test: it would sweep and re-render. limits: rates (sessions, votes,
    ballots) as --limit-sessions, --limit-votes, --limit-ballots take them;
    proxies as --proxy."""
    return Site(data, replace(DEFAULTS, refresh_every=3600,
                              limit_sessions=limits[0], limit_votes=limits[1],
                              limit_ballots=limits[2], proxies=proxies))


async def started(data, **kwargs):
    """A started Site over a started data interface, as server.py has it."""
    await data.start()
    site = new_site(data, **kwargs)
    await site.start()
    return site


async def stopped(site):
    await site.stop()
    await site.data.close()


@pytest.fixture
async def site(new_data):
    s = await started(new_data())
    yield s
    await stopped(s)


async def test_ugly(site):
    r = await get(site, '/ugly')
    assert (r.status, r.content_type, r.body) == (200, TEXT, b'UGLY')
    assert 'Set-Cookie' not in headers(r)


async def test_index_offers_two_stickers_and_a_session(site):
    r = await get(site, '/')
    assert (r.status, r.content_type) == (200, HTML)
    for header in FRAMING:
        assert header in r.headers
    cookie = headers(r)['Set-Cookie']
    assert 'Path=/' in cookie and 'HttpOnly' in cookie
    assert 'SameSite=Lax' in cookie and 'Max-Age=31536000' in cookie
    session, signature = new_sid(r).split('.')
    uuid.UUID(session)
    assert site.sessions.check(new_sid(r)) == session
    html = text(r)
    (a, win_a, lose_a), (b, win_b, lose_b) = ballots(html)
    assert a != b
    assert (win_a, lose_a) == (lose_b, win_b)
    assert 'action="/"' in html and '<nav' in html
    assert 'Vote counted' not in html


@pytest.mark.parametrize('cookie', [
    'not-a-uuid', '', "'; DROP TABLE sessions; --", 'a\x00b', '\udcff\udcfe',
    str(uuid.uuid4()).upper(), str(uuid.uuid4()) + ' ', 'x' * 10000,
    str(uuid.uuid4())])
async def test_malformed_cookie_starts_a_new_session(site, cookie):
    r = await get(site, '/good', cookie)
    assert r.status == 200
    assert new_sid(r) not in (None, cookie)


async def test_a_cookie_the_site_did_not_issue_is_a_new_session(site):
    """Unsigned, forged or tampered: a new session and its cookie, not the
    session the cookie names."""
    from test_sessions import forgeries
    cookie = await issued(site)
    for forged in forgeries(cookie):
        r = await get(site, '/', forged)
        assert r.status == 200 and new_sid(r), forged
        assert session_in(new_sid(r)) != session_in(cookie)
        assert site.sessions.check(new_sid(r)) == session_in(new_sid(r))


def test_new_sessions_are_random_version_4_uuids():
    from pages.http import new_session
    made = {new_session() for _ in range(1000)}
    assert len(made) == 1000
    for text in made:
        u = uuid.UUID(text)
        assert (u.version, u.variant, str(u)) == (4, uuid.RFC_4122, text)


def test_ballot_tokens_are_random_and_well_formed():
    from pages.http import _TOKEN, ballot_tokens
    made = [t for _ in range(1000) for t in ballot_tokens()]
    assert len(set(made)) == 2000
    assert all(_TOKEN.match(t) for t in made)


async def test_stop_ends_a_refresh_in_progress(new_data, monkeypatch):
    # A stop while the refresh waits on the database ends it (on Python 3.7
    # a CancelledError is an Exception, which a refresh must not swallow).
    data = new_data()
    await data.start()
    site = Site(data, replace(DEFAULTS, refresh_every=0.01,
                              limit_sessions='0', limit_votes='0'))
    await site.start()
    inside = asyncio.Event()

    async def waiting():
        inside.set()
        await asyncio.sleep(3600)
    monkeypatch.setattr(site, 'refresh', waiting)
    await asyncio.wait_for(inside.wait(), 5)
    # Not wait_for: its timeout would cancel stop() and so end it.
    stopping = asyncio.ensure_future(site.stop())
    done, _ = await asyncio.wait([stopping], timeout=5)
    assert stopping in done, 'stop() still waits for the refresh'
    await data.close()


async def test_returning_visitor_keeps_session(site):
    cookie = await issued(site)
    for path in ('/', '/good', '/bad'):
        r = await get(site, path, cookie)
        assert r.status == 200 and new_sid(r) is None


async def test_vote_moves_ratings(site):
    cookie, ((a, win, lose), (b, _, _)) = await new_ballots(site)
    before_a, before_b = await sticker(site, a), await sticker(site, b)
    r = await vote(site, cookie, win, lose)
    assert (r.status, r.content_type) == (200, HTML)
    assert 'Vote counted.' in text(r)
    assert len(ballots(text(r))) == 2
    assert new_sid(r) is None
    # Read replicas' cookie (pages.site.FRESH_COOKIE): not without them.
    assert 'fresh=' not in str(headers(r))
    after_a, after_b = await sticker(site, a), await sticker(site, b)
    assert after_a['rating'] == before_a['rating'] + 1
    assert after_a['votes_plus'] == before_a['votes_plus'] + 1
    assert after_a['votes_minus'] == before_a['votes_minus']
    assert after_b['rating'] == before_b['rating'] - 1
    assert after_b['votes_minus'] == before_b['votes_minus'] + 1
    # The same ballots again: refused, nothing moves.
    r = await vote(site, cookie, win, lose)
    assert r.status == 409 and 'unknown or was already used' in text(r)
    assert await sticker(site, a) == after_a


async def test_the_ballots_of_a_vote_page_vote_again(site):
    cookie, ((_, win, lose), _) = await new_ballots(site)
    r = await vote(site, cookie, win, lose)
    (_, win, lose), _ = ballots(text(r))
    assert (await vote(site, cookie, win, lose)).status == 200


@pytest.mark.parametrize('body, status, message', [
    (b'', 400, 'two different ballots'),
    (b'win=x', 400, 'two different ballots'),
    (b'win=%s&lose=%s' % (b'a' * 22, b'a' * 22), 400, 'two different'),
    (b'win=%s&lose=%s' % (b'a' * 22, b'b' * 22), 409, 'already used'),
    (b"win=%27%3B+DROP+TABLE+x%3B+--&lose=%00", 400, 'two different'),
    (b'win=\xff\xfe' + b'a' * 20 + b'&lose=' + b'b' * 22, 400, 'two'),
    (b'win=%FF' + b'a' * 19 + b'&lose=' + b'b' * 22, 400, 'two different'),
    (b'&' * 50 + b'win=' + b'a' * 22, 400, 'two different'),
])
async def test_bad_ballots(site, body, status, message):
    r = await call(site, 'POST', '/', await issued(site), body)
    assert (r.status, r.content_type) == (status, HTML)
    assert message in text(r)


async def test_foreign_and_unpaired_ballots(site):
    cookie, ((a, win, lose), _) = await new_ballots(site)
    other, ((_, win2, lose2), _) = await new_ballots(site)
    before = await sticker(site, a)
    r = await vote(site, other, win, lose)
    assert r.status == 409 and 'another visitor' in text(r)
    r = await vote(site, None, win, lose)
    assert r.status == 409 and 'another visitor' in text(r)
    # A cookie that names this session but that the site did not sign.
    from test_sessions import forgeries
    for forged in forgeries(cookie):
        r = await vote(site, forged, win, lose)
        assert r.status == 409 and 'another visitor' in text(r), forged
    r = await vote(site, cookie, win, lose2)
    assert r.status == 400 and 'not issued together' in text(r)
    assert await sticker(site, a) == before
    assert (await vote(site, cookie, win, lose)).status == 200


async def test_body_over_8_kib_is_refused(site):
    cookie, ((_, win, lose), _) = await new_ballots(site)
    body = (FORM % (win, lose)).encode() + b'&pad=' + b'x' * 9000
    r = await call(site, 'POST', '/', cookie, body)
    assert r.status == 413 and 'too large' in text(r)
    assert (await vote(site, cookie, win, lose)).status == 200


async def test_concurrent_double_post_counts_once(site):
    cookie, ((a, win, lose), _) = await new_ballots(site)
    before = await sticker(site, a)
    results = await asyncio.gather(*[
        vote(site, cookie, win, lose) for _ in range(6)])
    assert sorted(r.status for r in results) == [200, 409, 409, 409, 409, 409]
    assert (await sticker(site, a))['rating'] == before['rating'] + 1


async def test_expired_ballot_is_refused(site, monkeypatch):
    monkeypatch.setattr(site, 'ballot_ttl', 0.2)
    # On PostgreSQL every server the other suites keep running sweeps
    # expired ballots every 5 s, so with many of them a sweep comes often:
    # one that is gone already answers "unknown" instead. So the ballots are
    # voted on 0.1 s after they expire, and a swept one is tried again.
    for _ in range(10):
        cookie, ((a, win, lose), _) = await new_ballots(site)
        before = await sticker(site, a)
        await asyncio.sleep(0.3)
        r = await vote(site, cookie, win, lose)
        assert r.status == 409
        assert await sticker(site, a) == before
        if 'expired' in text(r):
            return
        assert 'unknown' in text(r), text(r)
    pytest.fail('every expired ballot was swept before it could be refused')


@pytest.mark.parametrize('page, best', [('/good', True), ('/bad', False)])
async def test_ranked_pages(site, page, best):
    expected = ranked(await all_stickers(site), best)
    r = await get(site, page)
    assert (r.status, r.content_type) == (200, HTML)
    html = text(r)
    assert cards(html) == expected
    assert new_sid(r)
    assert ('The best 9' if best else 'The worst 9') in html
    assert 'aria-current="page"' in html


CARD = re.compile(
    r'data-sticker-id="(\d+)".*?title="rating">[+]?(-?\d+)</p>.*?'
    r'▲ (\d+)</span> <span class="down" title="votes against">▼ (\d+)<',
    re.DOTALL)


def shown(html):
    """{sticker id: (rating, votes for, votes against)} of a ranked page."""
    return {int(i): tuple(int(x) for x in rest)
            for i, *rest in CARD.findall(html)}


async def test_a_vote_changes_the_next_good_page(site):
    cookie = await issued(site)
    top = shown(text(await get(site, '/good', cookie)))
    assert len(top) == 9
    # Ask for pairs until one holds a sticker of the best nine.
    for _ in range(5000):
        pair = ballots(text(await get(site, '/', cookie)))
        chosen = [b for b in pair if b[0] in top]
        if chosen:
            break
    winner, win, lose = chosen[0]
    assert (await vote(site, cookie, win, lose)).status == 200
    html = text(await get(site, '/good', cookie))
    rating, plus, minus = top[winner]
    assert shown(html)[winner] == (rating + 1, plus + 1, minus)
    assert cards(html) == ranked(await all_stickers(site), True)


async def stats(site):
    """The counters once the visits so far are written."""
    await site.visits.flush()
    return await site.data.stats()


async def test_good_without_a_cookie_moves_counters_each_time(site):
    sessions = set()
    for _ in range(3):
        before = await stats(site)
        r = await get(site, '/good')
        after = await stats(site)
        assert after.users == before.users + 1
        assert after.views == before.views + 1
        assert after.sessions == before.sessions + 1
        sessions.add(new_sid(r))
    assert len(sessions) == 3 and None not in sessions
    # A returning visitor is a view, not a new user.
    before = await stats(site)
    await get(site, '/bad', sessions.pop())
    after = await stats(site)
    assert (after.users, after.views, after.sessions) == (
        before.users, before.views + 1, before.sessions)


def counted(before, after):
    return (after.users - before.users, after.views - before.views,
            after.sessions - before.sessions)


def batches(site, failures=0):
    """Sizes of the batches site.visits writes; the first `failures`
    batches fail as if the database were down."""
    sizes, write = [], site.data.record_visits

    async def record_visits(visits):
        if len(sizes) < failures:
            sizes.append(0)
            raise DataUnavailable('down for the test')
        sizes.append(len(visits))
        await write(visits)
    site.data.record_visits = record_visits
    return sizes


async def test_visits_are_written_in_batches(site):
    sizes = batches(site)
    before = await stats(site)
    pages = await asyncio.gather(*[get(site, path) for path in
                                   ['/good', '/bad', '/'] * 20])
    assert {r.status for r in pages} == {200}
    assert counted(before, await stats(site)) == (60, 60, 60)
    assert sum(sizes) == 60 and len(sizes) < 10, sizes


async def test_a_backlog_of_visits_goes_a_slice_per_call(site):
    """Visits piled up while the database was away are written a slice
    per call (each call's encoding holds the loop), all of them."""
    from pages import visits
    sizes = batches(site)
    before = await stats(site)
    session = str(uuid.uuid4())
    for _ in range(visits.SLICE * 3 + 7):
        site.visits.add(Visit(session, '127.0.0.1', 'test'))
    await site.visits.flush()
    assert sizes == [visits.SLICE] * 3 + [7]
    assert counted(before, await stats(site))[1] == visits.SLICE * 3 + 7


async def test_visits_wait_out_an_outage(site, caplog):
    sizes = batches(site, failures=3)
    before = await stats(site)
    for _ in range(5):
        assert (await get(site, '/good')).status == 200
    # Visitors and views only: a server on the shared database may sweep
    # the idle sessions of earlier tests meanwhile.
    assert counted(before, await stats(site))[:2] == (5, 5)
    assert sizes[:3] == [0, 0, 0] and sum(sizes) == 5
    # Pages still answer here, so each failure is an outage of its own.
    lines = [r.message for r in caplog.records if r.name == 'pages']
    assert len(lines) <= 6 and 'back after' in lines[-1], lines


async def test_a_refused_batch_is_dropped_not_retried(site, caplog):
    """A visit the database refuses is a bug, not an outage: its batch is
    dropped (and logged) at once, and the visits after it are written."""
    before, lost = await stats(site), site.visits.lost
    site.visits.add(Visit('not-a-uuid', '', ''))
    await asyncio.wait_for(site.visits.flush(), 5)
    assert site.visits.lost == lost + 1 and site.outage.since is None
    assert (await get(site, '/good')).status == 200
    assert counted(before, await stats(site)) == (1, 1, 1)
    assert any('bad argument' in r.message for r in caplog.records)


async def test_stop_writes_the_visits_left(new_data):
    site = await started(new_data())
    before = await site.data.stats()
    for path in ('/good', '/bad', '/'):
        assert (await get(site, path)).status == 200
    await site.stop()
    try:
        assert counted(before, await site.data.stats()) == (3, 3, 3)
    finally:
        await site.data.close()


async def test_stop_gives_up_on_a_database_that_stays_down(new_data, caplog,
                                                          monkeypatch):
    monkeypatch.setattr('pages.visits.CLOSE_TIMEOUT', 0.3)
    site = await started(new_data())
    sizes = batches(site, failures=10 ** 6)
    before = await site.data.stats()
    assert (await get(site, '/good')).status == 200
    await site.stop()
    try:
        assert counted(before, await site.data.stats()) == (0, 0, 0)
        assert sizes and not any(sizes)
        assert any('1 in all' in r.message for r in caplog.records)
    finally:
        await site.data.close()


async def test_ballots_of_the_index_are_in_the_database(site):
    before = await stats(site)
    cookie, ((a, win, lose), (b, _, _)) = await new_ballots(site)
    after = await stats(site)
    assert after.ballots == before.ballots + 2
    assert (after.views, after.users) == (before.views + 1, before.users + 1)
    # They are this visitor's pair, as issued: the database takes them.
    assert await site.data.cast_vote(session_in(cookie), win,
                                     lose) == VoteOutcome.OK
    assert (await stats(site)).votes == after.votes + 1


def fail_once(data, name, error, after=False):
    """data.`name` raises `error` at its next call: before the call, or
    (after) once the database answered it; later calls go through."""
    method = getattr(data, name)

    async def failing(*args):
        setattr(data, name, method)
        if after:
            await method(*args)
        raise error
    setattr(data, name, failing)


@pytest.mark.parametrize('counted', [False, True])
async def test_a_vote_whose_answer_was_lost_is_sent_again(site, counted):
    cookie, ((_, win, lose), _) = await new_ballots(site)
    before = (await stats(site)).votes
    fail_once(site.data, 'cast_vote', VoteUnknown('lost'), after=counted)
    r = await vote(site, cookie, win, lose)
    assert (r.status, headers(r).get('Retry-After')) == (503, '1')
    assert 'Send it again' in text(r)
    # Sent again: counted once, whether the lost one was or not.
    r = await vote(site, cookie, win, lose)
    assert r.status == (409 if counted else 200)
    assert (await stats(site)).votes == before + 1


async def test_a_vote_counted_without_a_new_pair_is_a_200(site):
    cookie, ((_, win, lose), _) = await new_ballots(site)
    before = (await stats(site)).votes
    fail_once(site.data, 'sticker_pair', DataUnavailable('down'))
    r = await vote(site, cookie, win, lose)
    assert (r.status, r.content_type) == (200, HTML)
    assert 'Vote counted' in text(r) and 'Retry-After' not in headers(r)
    assert site.outage.since is not None    # still down, not back
    assert (await stats(site)).votes == before + 1


async def test_about_shows_counts_of_the_last_refresh(site):
    r = await get(site, '/about')
    assert (r.status, r.content_type) == (200, HTML)
    html = text(r)
    assert stat(html, 'packs') == len(EXPECTED.packs)
    assert stat(html, 'stickers') == len(EXPECTED.stickers)
    assert 'aria-current="page"' in html and new_sid(r) is None
    users, views = stat(html, 'users'), stat(html, 'views')
    await get(site, '/good')
    assert text(await get(site, '/about')) == html   # until the next refresh
    await site.visits.flush()
    await site.refresh()
    html = text(await get(site, '/about'))
    assert stat(html, 'users') >= users + 1
    assert stat(html, 'views') >= views + 1


async def test_json_api(site):
    r = await get(site, '/stickers')
    assert (r.status, r.content_type) == (200, JSON)
    packs = json.loads(r.body)
    assert [p['name'] for p in packs] == sorted(p.name for p in EXPECTED.packs)
    for p in packs:
        ids = [s.id for s in EXPECTED.stickers if s.pack == p['name']]
        assert p['stickers'] == len(ids)
        assert p['url'] == '/stickers/' + p['name']
    first = EXPECTED.stickers[0]
    r = await get(site, '/stickers/' + first.pack)
    pack = json.loads(r.body)
    assert (r.status, r.content_type) == (200, JSON)
    assert pack['name'] == first.pack and pack['title']
    assert pack['stickers'][0]['image'] == first.image
    r = await get(site, '/stickers/%s/%d' % (first.pack, first.id))
    assert (r.status, r.content_type) == (200, JSON)
    assert set(json.loads(r.body)) == {'id', 'pack', 'pack_title', 'image',
                                       'rating', 'votes_plus', 'votes_minus'}
    assert json.loads(r.body)['id'] == first.id


PACK = EXPECTED.packs[0].name


@pytest.mark.parametrize('path, error', [
    ('/stickers/no_such_pack', 'no such pack'),
    ('/stickers/no_such_pack/1', 'no such sticker'),
    ('/stickers/%s/999999' % PACK, 'no such sticker'),
    ('/stickers/%s/abc' % PACK, 'no such sticker'),
    ('/stickers/%s/\u00b2' % PACK, 'no such sticker'),
    ('/stickers/%s/-1' % PACK, 'no such sticker'),
    ('/stickers/%s/1\x00' % PACK, 'no such sticker'),
    ('/stickers/%s/%s' % (PACK, '9' * 40), 'no such sticker'),
    ("/stickers/'; DROP TABLE stickers; --", 'no such pack'),
    ('/stickers/a\x00b', 'no such pack'),
    ('/stickers/\udcff\udcfe', 'no such pack'),
    ('/stickers/' + 'a' * 65, 'no such pack'),
    ('/stickers/%s/1/more' % PACK, 'not found'),
])
async def test_json_api_misses_are_404_json(site, path, error):
    r = await get(site, path)
    assert (r.status, r.content_type) == (404, JSON)
    assert json.loads(r.body) == {'error': error}


def pack_ranking(api_pack):
    """Sticker ids of a pack (as the JSON API gives it), best first."""
    key = lambda s: (s['rating'], s['id'])  # noqa: E731
    return [s['id'] for s in sorted(api_pack['stickers'], key=key, reverse=True)]


async def test_pack_page_ranks_the_pack_in_html(site):
    pack = EXPECTED.packs[0]
    api = json.loads((await get(site, '/stickers/' + pack.name)).body)
    before = await stats(site)
    r = await get(site, '/packs/' + pack.name)
    assert (r.status, r.content_type) == (200, HTML)
    assert new_sid(r) and headers(r)['X-Frame-Options'] == 'DENY'
    assert counted(before, await stats(site)) == (1, 1, 1)
    html = text(r)
    assert cards(html) == pack_ranking(api)
    assert html.count('href="/packs/%s/' % pack.name) == len(api['stickers'])
    assert '<h1 class="page-title">%s</h1>' % api['title'] in html
    assert 'href="/stickers' not in html      # links lead to HTML


async def test_sticker_page_shows_its_place_with_current_ratings(site):
    pack = EXPECTED.packs[0].name
    cookie = await issued(site)
    last = pack_ranking(json.loads((await get(site, '/stickers/' + pack)).body))[-1]
    r = await get(site, '/packs/%s/%d' % (pack, last), cookie)
    assert (r.status, r.content_type) == (200, HTML) and not new_sid(r)
    html = text(r)
    ids = pack_ranking(json.loads((await get(site, '/stickers/' + pack)).body))
    assert 'No. %d of %d in' % (ids.index(last) + 1, len(ids)) in html
    api = json.loads((await get(site, '/stickers/%s/%d' % (pack, last))).body)
    assert api['image'] in html and 'href="/packs/%s"' % pack in html
    assert 'title="rating">%s%d<' % ('+' if api['rating'] > 0 else '',
                                     api['rating']) in html
    assert '▲ %d' % api['votes_plus'] in html and 'href="/stickers' not in html


async def test_a_vote_shows_on_the_sticker_page_at_once(site):
    cookie, ((a, win, lose), _) = await new_ballots(site)
    pack = next(x['pack'] for x in await all_stickers(site) if x['id'] == a)
    path = '/packs/%s/%d' % (pack, a)
    rating = re.compile(r'title="rating">[+]?(-?\d+)<')
    before = int(rating.search(text(await get(site, path, cookie))).group(1))
    assert (await vote(site, cookie, win, lose)).status == 200
    after = int(rating.search(text(await get(site, path, cookie))).group(1))
    assert after == before + 1


@pytest.mark.parametrize('path, what', [
    ('/packs/no_such_pack', 'pack'),
    ('/packs/no_such_pack/1', 'sticker'),
    ('/packs/%s/999999' % PACK, 'sticker'),
    ('/packs/%s/abc' % PACK, 'sticker'),
    ('/packs/%s/\u00b2' % PACK, 'sticker'),
    ('/packs/%s/-1' % PACK, 'sticker'),
    ('/packs/%s/1\x00' % PACK, 'sticker'),
    ('/packs/%s/%s' % (PACK, '9' * 40), 'sticker'),
    ("/packs/'; DROP TABLE stickers; --", 'pack'),
    ('/packs/a\x00b', 'pack'),
    ('/packs/\udcff\udcfe', 'pack'),
    ('/packs/..', 'pack'),
    ('/packs/' + 'a' * 65, 'pack'),
    ('/packs/' + 'a' * 100000, 'pack'),
])
async def test_pack_and_sticker_misses_are_the_404_page(site, path, what):
    r = await get(site, path)
    assert (r.status, r.content_type) == (404, HTML)
    assert 'There is no such %s.' % what in text(r) and not new_sid(r)


async def test_hostile_visitor_text_is_harmless(site):
    for user_agent, ip in [("'; DROP TABLE sessions; -- \u2603", '::1'),
                           ('\udcff\x00' * 3000, '\udcfe' * 100),
                           ('x' * 100000, '1' * 1000)]:
        for path in ('/', '/good', '/bad'):
            r = await get(site, path, user_agent=user_agent, ip=ip)
            assert r.status == 200, (path, text(r))
    s = await stats(site)
    assert (s.packs, s.stickers) == (len(EXPECTED.packs), len(EXPECTED.stickers))


async def test_limits_refuse_new_sessions_and_votes_per_address(new_data):
    site = await started(new_data(), limits=('2/m', '1/m', '0'))
    try:
        cookie = await issued(site, ip='10.0.0.3')
        statuses = [(await get(site, '/good')).status for _ in range(3)]
        assert statuses == [200, 200, 429]
        r = await get(site, '/')
        assert r.status == 429 and 'Too many requests' in text(r)
        assert int(headers(r)['Retry-After']) >= 1
        assert (await get(site, '/', cookie)).status == 200   # not a new one
        # A cookie the site did not issue is a new session: refused too.
        r = await get(site, '/', str(uuid.uuid4()))
        assert r.status == 429 and not new_sid(r)
        r = await get(site, '/', ip='10.0.0.2')                # another address
        cookie, ((_, win, lose), _) = new_sid(r), ballots(text(r))
        assert (await vote(site, cookie, win, lose, ip='10.0.0.2')).status == 200
        r = await vote(site, cookie, 'a' * 22, 'b' * 22, ip='10.0.0.2')
        assert r.status == 429 and 'Retry-After' in headers(r)
    finally:
        await stopped(site)


async def test_behind_a_proxy_the_forwarded_address_is_the_visitor(new_data):
    site = await started(new_data(), limits=('2/m', '0', '0'),
                         proxies=('127.0.0.1',))
    try:
        nginx = dict(ip='127.0.0.1')
        statuses = [(await get(site, '/good', forwarded='198.51.100.7', **nginx)
                     ).status for _ in range(3)]
        assert statuses == [200, 200, 429]
        # Another visitor through the same proxy; the last entry counts
        # (the one the proxy wrote), not what a visitor put before it.
        assert (await get(site, '/good', forwarded='198.51.100.7, 198.51.100.8',
                          **nginx)).status == 200
        # Without a usable header the proxy's own address counts.
        for junk in ('', 'unknown', '\udcff' * 50, '1.2.3.4, ' * 1000 + 'x'):
            assert site.client(Request('GET', '/', {}, '127.0.0.1', '', b'',
                                       junk)) == '127.0.0.1'
        # A visitor who is not the proxy cannot name another address.
        for _ in range(3):
            r = await get(site, '/good', forwarded='198.51.100.9', ip='10.9.9.9')
        assert r.status == 429
        await site.visits.flush()
    finally:
        await stopped(site)


def test_limits_are_on_behind_a_proxy_and_off_on_the_loopback_alone():
    local = replace(DEFAULTS, host='127.0.0.1')
    assert local.limit('sessions') == '0'
    assert replace(local, proxies=('127.0.0.1',)).limit('sessions') == '30/m'
    assert replace(local, proxies=('127.0.0.1',),
                   limit_sessions='5/m').limit('sessions') == '5/m'


async def test_ballot_pairs_are_limited_per_address_and_per_session(
        new_data):
    site = await started(new_data(), limits=('0', '0', '3/m'))
    try:
        # Per address, whatever the session.
        statuses = [(await get(site, '/', ip='10.0.1.1')).status
                    for _ in range(4)]
        assert statuses == [200, 200, 200, 429]
        r = await get(site, '/', await issued(site, '10.0.1.1'),
                      ip='10.0.1.1')
        assert r.status == 429 and 'from your address' in text(r)
        assert int(headers(r)['Retry-After']) >= 1
        # Per session, from any address; pages without ballots are not.
        cookie = await issued(site, '10.0.2.1')
        statuses = [(await get(site, '/', cookie, ip='10.0.3.%d' % i)).status
                    for i in range(4)]
        assert statuses == [200, 200, 200, 429]
        r = await get(site, '/', cookie, ip='10.0.4.1')
        assert r.status == 429 and 'from your session' in text(r)
        assert (await get(site, '/good', cookie, ip='10.0.4.1')).status == 200
        # The pair after a vote counts; refused before the vote is cast,
        # so its ballots stay unused.
        r = await get(site, '/', ip='10.0.5.1')
        cookie, ((_, win, lose), _) = new_sid(r), ballots(text(r))
        for i in range(2):
            r = await vote(site, cookie, win, lose, ip='10.0.6.%d' % i)
            assert r.status == 200 and 'Vote counted.' in text(r)
            (_, win, lose), _ = ballots(text(r))
        r = await vote(site, cookie, win, lose, ip='10.0.7.1')
        assert r.status == 429 and 'from your session' in text(r)
        assert await site.data.cast_vote(session_in(cookie), win,
                                         lose) == VoteOutcome.OK
    finally:
        await stopped(site)


def calls_of(data, name):
    """The arguments of every call of data.`name` from now on."""
    calls, method = [], getattr(data, name)

    async def counted(*args):
        calls.append(args)
        return await method(*args)
    setattr(data, name, counted)
    return calls


async def test_forged_sessions_stop_at_the_session_limit(new_data):
    """A flood of GET / with made-up session cookies: each is a new
    session, so beyond --limit-sessions none reaches the database."""
    site = await started(new_data(), limits=('5/m', '0', '0'))
    try:
        pairs = calls_of(site.data, 'sticker_pair')
        statuses = [(await get(site, '/', str(uuid.uuid4()))).status
                    for _ in range(50)]
        assert statuses == [200] * 5 + [429] * 45
        assert len(pairs) == 5
    finally:
        await stopped(site)


async def test_pending_visits_stay_bounded_while_the_database_is_slow(
        site, monkeypatch, caplog):
    monkeypatch.setattr('pages.visits.MAX_PENDING', 50)
    slow, write = asyncio.Event(), site.data.record_visits

    async def record_visits(visits):
        await slow.wait()
        await write(visits)
    site.data.record_visits = record_visits
    before = await stats(site)
    most = 0
    for _ in range(200):
        site.visits.add(Visit(str(uuid.uuid4()), 'ip', 'ua'))
        most = max(most, len(site.visits.pending))
        await asyncio.sleep(0)   # the writer takes its first batch
    assert most == 50 and site.visits.lost == 200 - 1 - 50
    assert any('more than 50 wait' in r.message for r in caplog.records)
    slow.set()
    # The one in the first batch and the last 50.
    assert counted(before, await stats(site)) == (51, 51, 51)


class Relay:
    """A TCP relay to a database, which a test cuts (open connections
    reset, new ones refused) and mends: an outage as the site sees it; or
    silences (open connections forward nothing more, in either direction,
    and stay open; new ones are relayed): a link dead without a reset."""

    def __init__(self, port):
        self.target, self.port = port, 0
        self.server, self.writers, self.tasks = None, set(), set()
        self.silenced = set()    # writers that get nothing more

    async def open(self):
        self.server = await asyncio.start_server(
            self._relay, '127.0.0.1', self.port, reuse_address=True)
        self.port = self.server.sockets[0].getsockname()[1]

    async def cut(self):
        # Connections first: wait_closed() may wait for them (Python 3.12),
        # and one still connecting upstream would relay on past the cut.
        self.server.close()
        for task in list(self.tasks):
            task.cancel()
        for w in list(self.writers):
            w.transport.abort()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.server.wait_closed()

    def silence(self):
        self.silenced |= self.writers

    async def _relay(self, reader, writer):
        task = asyncio.current_task()
        self.tasks.add(task)
        try:
            await self._connect(reader, writer)
        except asyncio.CancelledError:
            pass    # by cut(); asyncio 3.11 logs a cancelled relay task
        finally:
            writer.transport.abort()
            self.tasks.discard(task)

    async def _connect(self, reader, writer):
        try:
            up_reader, up_writer = await asyncio.open_connection(
                '127.0.0.1', self.target)
        except OSError:
            writer.transport.abort()
            return
        self.writers |= {writer, up_writer}
        await asyncio.gather(self._pipe(reader, up_writer),
                             self._pipe(up_reader, writer))
        self.writers -= {writer, up_writer}

    async def _pipe(self, reader, writer):
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                if writer in self.silenced:
                    continue
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.transport.abort()


def database_port(backend):
    data = backend.new()
    if hasattr(data, 'dsn'):
        return int(re.search(r':(\d+)/', data.dsn).group(1))
    return data.address.port


async def until_status(site, path, status):
    """The first answer of `status` to path within 10 s."""
    last = []

    async def answered():
        last[:] = [await get(site, path)]
        return last[0] if last[0].status == status else None
    return await until(answered, 10, 0.1, lambda: text(last[0]))


async def test_outage_answers_503_then_serves_again(relayed_backend):
    relay = Relay(database_port(relayed_backend))
    await relay.open()
    site = await started(relayed_backend.via(relay.port))
    try:
        assert (await get(site, '/good')).status == 200
        cookie, ((_, win, lose), _) = await new_ballots(site)
        await relay.cut()
        for path in ('/', '/good', '/bad'):
            r = await until_status(site, path, 503)
            assert r.content_type == HTML
            assert 'The database is unavailable' in text(r)
            assert headers(r)['Retry-After'] == '1'
        r = await vote(site, cookie, win, lose)
        assert r.status == 503 and 'unavailable' in text(r)
        for path in ('/stickers/%s' % PACK, '/stickers/%s/1' % PACK):
            r = await get(site, path)
            assert (r.status, r.content_type) == (503, JSON)
            assert json.loads(r.body) == {'error': 'database unavailable'}
            assert headers(r)['Retry-After'] == '1'
        assert site.outage.since is not None
        # What needs no database answers as before.
        assert (await get(site, '/ugly')).status == 200
        assert (await get(site, '/about')).status == 200
        assert (await get(site, '/stickers')).status == 200
        assert (await get(site, '/static/style.css')).status == 200
        # The failed vote counted nothing: its ballots still vote.
        await relay.open()
        await until_status(site, '/good', 200)
        assert site.outage.since is None
        assert (await vote(site, cookie, win, lose)).status == 200
    finally:
        await stopped(site)
        await relay.cut()


# Seconds within which pages come back after the link went silent (the
# drivers drop a link whose calls waited their request timeout, 10 s at
# most, with no reply).
SILENT_BACK = 20


async def test_a_silent_link_is_dropped_and_pages_come_back(relayed_backend):
    """The database's link goes silent (no reply, no reset: a peer or a
    network gone quiet): the driver drops it and connects anew, so pages
    are served again within seconds, not never; none waits past that
    (nor is a 500)."""
    relay = Relay(database_port(relayed_backend))
    await relay.open()
    site = await started(relayed_backend.via(relay.port))
    try:
        assert (await get(site, '/good')).status == 200
        relay.silence()
        loop = asyncio.get_event_loop()
        began, status = loop.time(), None
        while status != 200:
            assert loop.time() - began < SILENT_BACK, 'still %s' % status
            # Not wait_for: a cancelled call may wait for what it waits on.
            answer = asyncio.ensure_future(get(site, '/good'))
            await asyncio.wait((answer,), timeout=max(
                0, began + SILENT_BACK - loop.time()))
            assert answer.done(), 'no answer within %d s' % SILENT_BACK
            status = answer.result().status
            assert status in (200, 503)
            await asyncio.sleep(0.1)
        print('served again after %.1f s' % (loop.time() - began))
    finally:
        await stopped(site)
        await relay.cut()


@pytest.fixture
def static_site():
    # Static files and the 404 page need no database; the stickers'
    # pictures are written as server.py writes them before it serves.
    write_images(DEFAULTS.images, TEST_PACKS)
    return new_site(None)


@pytest.mark.parametrize('path, content_type, start', [
    ('/static/style.css', 'text/css', b''),
    ('/favicon.ico', None, b'\0\0\1\0'),
    (EXPECTED.stickers[0].image, 'image/svg+xml', b'<svg'),
])
async def test_static_files(static_site, path, content_type, start):
    r = await get(static_site, path)
    assert r.status == 200 and r.body.startswith(start) and r.body
    if content_type:
        assert r.content_type == content_type
    assert (await call(static_site, 'HEAD', path)).body == r.body


@pytest.mark.parametrize('path', [
    '/static/../server.py', '/static/../../etc/passwd', '/img/../../server.py',
    '/static/./../server.py', '/static//etc/passwd', '/static/\x00style.css',
    '/static/style.css\x00.png', '/static/', '/img/', '/static/\udcff',
    '/static/' + 'x' * 5000,
])
async def test_paths_outside_static_are_404(static_site, path):
    r = await get(static_site, path)
    assert r.status == 404
    assert b'import' not in r.body and b'root:' not in r.body


@pytest.mark.parametrize('path', ['/nope', '/good/', '/index.html', '/img'])
async def test_unknown_page_is_404(static_site, path):
    r = await get(static_site, path)
    assert (r.status, r.content_type) == (404, HTML)
    assert 'There is no page here' in text(r)


class Counted:
    """A data interface that counts the calls made of it."""

    def __init__(self, data):
        self.data, self.calls = data, 0

    def __getattr__(self, name):
        self.calls += 1
        return getattr(self.data, name)


class WithPrimary:
    """A database behind a Site as a Replicated is (data_interface.
    replicated): its reads from the primary, `fresh`, counted apart."""

    def __init__(self, data):
        self.data, self.fresh = data, Counted(data)

    def __getattr__(self, name):
        return getattr(self.data, name)


async def test_only_a_fresh_cookie_of_the_site_reads_from_the_primary(
        tarantool):
    data = WithPrimary(AsynctntData(tarantool_address(tarantool)))
    await data.start()
    site = Site(data, replace(DEFAULTS, refresh_every=3600, replica_lag=5))
    await site.start()
    primary = data.fresh
    pages = ('/good', '/bad', '/stickers/%s' % EXPECTED.packs[0].name)
    try:
        cookie, ((_, win, lose), _) = await new_ballots(site)
        r = await vote(site, cookie, win, lose)
        assert r.status == 200
        # Twice the lag bound and a second: 11 s.
        fresh = re.match(r'fresh=([^;]*); Path=/; Max-Age=11;',
                         headers(r)['Set-Cookie']).group(1)
        for path in pages:
            assert (await get(site, path, cookie, fresh=fresh)).status == 200
        assert primary.calls == 3
        other = await issued(site)
        session = session_in(cookie)
        for value, sid in [
                ('1', cookie),                  # what it used to be
                (fresh[:-1] + ('B' if fresh[-1] != 'B' else 'C'),
                 cookie),                       # a signature made up
                (fresh, other),                 # another session's
                (fresh, None),
                (site.sessions.fresh(session, -2), cookie),     # past
                (site.sessions.fresh(session, 3600), cookie),   # too long
                (fresh + '0' * 5000, cookie)]:
            for path in pages:
                assert (await get(site, path, sid, fresh=value)).status == 200
        assert primary.calls == 3
    finally:
        await stopped(site)
