"""Reading the site's pages the way a visitor (or a benchmark check) does."""
import re

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


def stat(html, name):
    m = re.search(r'id="stat-%s"[^>]*>([\d,]+)<' % name, html)
    assert m, 'no stat %s in about page' % name
    return int(m.group(1).replace(',', ''))


async def all_stickers(session, base):
    """Every sticker from the JSON API."""
    result = []
    async with session.get(base + '/stickers') as r:
        packs = await r.json()
    for p in packs:
        async with session.get(base + p['url']) as r:
            result.extend((await r.json())['stickers'])
    return result


def ranked(stickers, best):
    key = lambda s: (s['rating'], s['id'])  # noqa: E731
    return [s['id'] for s in sorted(stickers, key=key, reverse=best)[:9]]


def client(cookie=None):
    """A client session; a fresh visitor unless a session cookie is given."""
    jar = aiohttp.DummyCookieJar()
    headers = {'Cookie': 'sid=' + cookie} if cookie else {}
    return aiohttp.ClientSession(cookie_jar=jar, headers=headers)
