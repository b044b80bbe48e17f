"""Reading the site's pages the way a visitor (or a benchmark check) does."""
import asyncio
import re
import uuid

import aiohttp

TOKEN_PAIR = re.compile(
    r'name="win" value="([A-Za-z0-9_-]{22})">\s*'
    r'<input type="hidden" name="lose" value="([A-Za-z0-9_-]{22})">')
CHOICE = re.compile(r'class="sticker-choice" data-sticker-id="(\d+)"')
CARD = re.compile(r'<article class="card" data-sticker-id="(\d+)" '
                  r'data-place="(\d+)"')


def ballots(html):
    """[(sticker id, win token, lose token)] of an index page."""
    pairs = TOKEN_PAIR.findall(html)
    ids = [int(i) for i in CHOICE.findall(html)]
    assert len(pairs) == 2 and len(ids) == 2, html
    return [(ids[i],) + pairs[i] for i in range(2)]


def cards(html):
    """Sticker ids of a /good or /bad page, in place order."""
    found = CARD.findall(html)
    assert [int(place) for _, place in found] == list(range(1, len(found) + 1))
    return [int(i) for i, _ in found]


STATS = ('packs', 'stickers', 'users', 'views', 'votes', 'sessions', 'ballots')
UGLY_TYPE = 'text/plain; charset=utf-8'
HTML_TYPE = 'text/html; charset=utf-8'
# Seconds a vote answered 200 may take to reach the rankings: a Redis
# Cluster's server applies its votes 0.25 s apart (docs/databases.md).
APPLIED_WITHIN = 1.0


def session_cookie(headers):
    """The sid a response sets (`UUID.SIGNATURE`, see pages.sessions), or
    None."""
    m = re.match(r'sid=([^;]*)', headers.get('Set-Cookie', ''))
    if not m:
        return None
    session, dot, signature = m.group(1).partition('.')
    try:
        uuid.UUID(session)
    except ValueError:
        return None
    return m.group(1) if dot and signature else None


def unrendered(html):
    """Template syntax left in a page, or None."""
    m = re.search(r'\{\{|\}\}|\{%|%\}|\{#', html)
    return m and html[max(0, m.start() - 40):m.end() + 40]


def stat(html, name):
    m = re.search(r'id="stat-%s"[^>]*>([\d,]+)<' % name, html)
    assert m, 'no stat %s in about page' % name
    return int(m.group(1).replace(',', ''))


def not_moved(r):
    """AssertionError for a redirect: a check reads the page it asked for,
    never one a Location names (it may be another site)."""
    assert not 300 <= r.status < 400, (
        'HTTP %d, a redirect: its Location was not followed' % r.status)


async def read_json(session, url):
    async with session.get(url, allow_redirects=False) as r:
        not_moved(r)
        return await r.json()


async def all_stickers(session, base, at_once=8):
    """Every sticker from the JSON API, packs read `at_once` at a time."""
    urls = [base + p['url'] for p in await read_json(session, base + '/stickers')]
    packs = []
    for i in range(0, len(urls), at_once):
        packs += await asyncio.gather(*(read_json(session, u)
                                        for u in urls[i:i + at_once]))
    return [s for pack in packs for s in pack['stickers']]


def vote_total(stickers):
    """Votes cast so far: every vote gives its winner one votes_plus."""
    return sum(s['votes_plus'] for s in stickers)


async def sticker(session, base, pack, sticker_id):
    async with session.get('%s/stickers/%s/%d' % (base, pack, sticker_id),
                           allow_redirects=False) as r:
        not_moved(r)
        assert r.status == 200, 'sticker %s/%d: HTTP %d' % (pack, sticker_id, r.status)
        return await r.json()


def ranked(stickers, best, count=9):
    """Ids in the order of /good (best) or /bad, the first `count`."""
    key = lambda s: (s['rating'], s['id'])  # noqa: E731
    return [s['id'] for s in sorted(stickers, key=key, reverse=best)[:count]]


def client(cookie=None):
    """A client session; a fresh visitor unless a session cookie is given."""
    jar = aiohttp.DummyCookieJar()
    headers = {'Cookie': 'sid=' + cookie} if cookie else {}
    return aiohttp.ClientSession(cookie_jar=jar, headers=headers)
