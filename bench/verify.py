"""Content checks of a running engine (and of nginx) before any timing.

Each check returns a short detail on success and raises on failure; the
runner times an engine only when every check passed.
"""
import asyncio

import aiohttp

from .pagecheck import (APPLIED_WITHIN, HTML_TYPE, UGLY_TYPE, all_stickers,
                        ballots, cards, client, not_moved, ranked, read_json,
                        session_cookie, stat, sticker, unrendered, vote_total)

TIMEOUT = aiohttp.ClientTimeout(total=30)


class CheckFailed(Exception):
    pass


def need(condition, message):
    if not condition:
        raise CheckFailed(message)


async def fetch(session, url, method='GET', **kw):
    """(status, headers, body); a redirect fails the check, unread."""
    async with session.request(method, url, timeout=TIMEOUT,
                               allow_redirects=False, **kw) as r:
        try:
            not_moved(r)
        except AssertionError as e:
            raise CheckFailed(str(e))
        return r.status, r.headers, await r.read()


async def check_ugly(base, api):
    async with client() as s:
        status, headers, body = await fetch(s, base + '/ugly')
    need(status == 200, 'HTTP %d' % status)
    need(body == b'UGLY', 'body %r, not UGLY' % body[:40])
    need(headers.get('Content-Type') == UGLY_TYPE,
         'Content-Type %r' % headers.get('Content-Type'))
    return '200 UGLY %s' % UGLY_TYPE


async def check_api(base, api):
    async with client() as s:
        status, _, _ = await fetch(s, base + '/stickers')
        need(status == 200, '/stickers: HTTP %d' % status)
        stickers = await all_stickers(s, base)
        packs = await read_json(s, base + '/stickers')
    ids = sorted(x['id'] for x in stickers)
    need(ids == list(range(1, len(ids) + 1)) and len(ids) >= 2,
         'sticker ids are not 1..N: %d stickers' % len(ids))
    need(sum(p['stickers'] for p in packs) == len(ids),
         'pack sizes do not add up to the stickers listed')
    api.update(packs=packs, stickers=stickers)
    return '%d packs, %d stickers' % (len(packs), len(stickers))


async def check_ranked(base, api, page, best):
    async with client() as s:
        status, headers, body = await fetch(s, base + page)
    need(status == 200, 'HTTP %d' % status)
    need(headers.get('Content-Type') == HTML_TYPE,
         'Content-Type %r' % headers.get('Content-Type'))
    expected = ranked(api['stickers'], best)
    got = cards(body.decode('utf-8'))
    need(got == expected, 'stickers %s, the API ranks %s' % (got, expected))
    return 'ids %s' % got


async def check_about(base, api):
    async with client() as s:
        status, headers, body = await fetch(s, base + '/about')
    need(status == 200, 'HTTP %d' % status)
    html = body.decode('utf-8')
    left = unrendered(html)
    need(left is None, 'template syntax left: %r' % left)
    packs, stickers = stat(html, 'packs'), stat(html, 'stickers')
    need(packs == len(api['packs']), '%d packs, the API has %d'
         % (packs, len(api['packs'])))
    need(stickers == len(api['stickers']), '%d stickers, the API has %d'
         % (stickers, len(api['stickers'])))
    others = {name: stat(html, name) for name in ('users', 'views', 'votes',
                                                    'sessions', 'ballots')}
    return '%d packs, %d stickers, %s' % (packs, stickers, ', '.join(
        '%s %d' % kv for kv in others.items()))


async def check_index(base, api):
    async with client() as s:
        status, headers, body = await fetch(s, base + '/')
    need(status == 200, 'HTTP %d' % status)
    need(session_cookie(headers), 'no sid cookie set: %r'
         % headers.get('Set-Cookie'))
    (a, win_a, lose_a), (b, win_b, lose_b) = ballots(body.decode('utf-8'))
    need(a != b, 'the same sticker twice: %d' % a)
    need(win_a != lose_a and (win_a, lose_a) == (lose_b, win_b),
         'the two forms do not hold one token pair')
    known = {x['id'] for x in api['stickers']}
    need(a in known and b in known, 'unknown sticker ids %d, %d' % (a, b))
    return 'stickers %d and %d' % (a, b)


async def check_vote(base, api):
    pack_of = {x['id']: x['pack'] for x in api['stickers']}
    async with client() as s:
        _, headers, body = await fetch(s, base + '/')
        cookie = session_cookie(headers)
        (a, win, lose), (b, _, _) = ballots(body.decode('utf-8'))
        before = [await sticker(s, base, pack_of[i], i) for i in (a, b)]
        total = vote_total(await all_stickers(s, base))
    form = {'win': win, 'lose': lose}
    async with client(cookie) as s:
        status, _, body = await fetch(s, base + '/', 'POST', data=form)
        need(status == 200 and b'Vote counted' in body,
             'POST /: HTTP %d, %r' % (status, body[:100]))
        ballots(body.decode('utf-8'))
        again, _, _ = await fetch(s, base + '/', 'POST', data=form)
        need(again == 409, 'the same ballots twice: HTTP %d, not 409' % again)
        # A Redis Cluster's server may apply it a moment later
        for _ in range(int(APPLIED_WITHIN * 10)):
            after = [await sticker(s, base, pack_of[i], i) for i in (a, b)]
            if after != before:
                break
            await asyncio.sleep(0.1)
        moved = vote_total(await all_stickers(s, base)) - total
    winner, loser = [dict(x) for x in before]
    winner.update(rating=winner['rating'] + 1, votes_plus=winner['votes_plus'] + 1)
    loser.update(rating=loser['rating'] - 1, votes_minus=loser['votes_minus'] + 1)
    need(after != before, 'the vote did not count: stickers %d and %d '
         'unchanged' % (a, b))
    need(after == [winner, loser], 'stickers went from %s to %s' % (before, after))
    need(moved == 1, 'the vote total moved by %d' % moved)
    return 'sticker %d +1, sticker %d -1, total +1' % (a, b)


async def check_pack(base, api):
    """The pack page of the first pack (the one bench.wrk times): its
    stickers best first, as the API rates them."""
    pack = api['packs'][0]['name']
    async with client() as s:
        status, headers, body = await fetch(s, base + '/packs/' + pack)
    need(status == 200, 'HTTP %d' % status)
    need(headers.get('Content-Type') == HTML_TYPE,
         'Content-Type %r' % headers.get('Content-Type'))
    expected = ranked([x for x in api['stickers'] if x['pack'] == pack], True,
                      count=None)
    got = cards(body.decode('utf-8'))
    need(got == expected, 'stickers %s, the API ranks %s' % (got, expected))
    return '%s: ids %s' % (pack, got)


async def check_sticker(base, api):
    """The sticker page of the first pack's first sticker: its rating and
    its place in the pack."""
    pack = api['packs'][0]['name']
    mine = [x for x in api['stickers'] if x['pack'] == pack]
    first = min(mine, key=lambda x: x['id'])
    place = ranked(mine, True, count=None).index(first['id']) + 1
    async with client() as s:
        status, headers, body = await fetch(s, '%s/packs/%s/%d' % (
            base, pack, first['id']))
    need(status == 200, 'HTTP %d' % status)
    html = body.decode('utf-8')
    need(first['image'] in html, 'no image %s' % first['image'])
    shown = 'No. %d of %d' % (place, len(mine))
    need(shown in html, '%r not on the page' % shown)
    return '%s/%d: %s' % (pack, first['id'], shown)


ENGINE_CHECKS = (
    ('ugly', check_ugly),
    ('api', check_api),
    ('good', lambda base, api: check_ranked(base, api, '/good', True)),
    ('bad', lambda base, api: check_ranked(base, api, '/bad', False)),
    ('about', check_about),
    ('pack', check_pack),
    ('sticker', check_sticker),
    ('index', check_index),
    ('vote', check_vote),
)


async def run_checks(base, checks):
    results, api = [], {}
    for name, check in checks:
        try:
            detail = await check(base, api)
            results.append({'check': name, 'ok': True, 'detail': detail})
        except (CheckFailed, AssertionError, aiohttp.ClientError,
                asyncio.TimeoutError, ValueError, KeyError) as e:
            text = str(e) or type(e).__name__
            results.append({'check': name, 'ok': False, 'detail': text[:400]})
            if name == 'api':
                break  # the later checks compare against the API
    return results


def engine(base):
    """[{check, ok, detail}] for an engine at base URL."""
    return asyncio.run(run_checks(base, ENGINE_CHECKS))


def nginx(base, about):
    """Checks of the nginx reference: the same /ugly, the copied /about."""
    async def same_about(base, api):
        async with client() as s:
            status, headers, body = await fetch(s, base + '/about')
        need(status == 200 and body == about, 'HTTP %d, %d bytes, not the '
             'copied %d' % (status, len(body), len(about)))
        need(headers.get('Content-Type') == HTML_TYPE,
             'Content-Type %r' % headers.get('Content-Type'))
        return '%d bytes as copied' % len(body)
    checks = [('ugly', check_ugly)]
    if about is not None:
        checks.append(('about', same_about))
    return asyncio.run(run_checks(base, checks))


def hello(base):
    """A bare framework reference serves /ugly only."""
    return asyncio.run(run_checks(base, [('ugly', check_ugly)]))


def failure(results):
    """The first failed check as one line, or None."""
    for r in results:
        if not r['ok']:
            return '%s: %s' % (r['check'], r['detail'])
    return None


async def _votes(base):
    async with client() as s:
        return vote_total(await all_stickers(s, base))


def votes(base):
    """Votes counted by the site (the JSON API's sum), without /about's lag."""
    return asyncio.run(_votes(base))


async def _page(base, path):
    async with client() as s:
        status, _, body = await fetch(s, base + path)
    need(status == 200, '%s: HTTP %d' % (path, status))
    return body


def page(base, path):
    return asyncio.run(_page(base, path))
