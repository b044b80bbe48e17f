"""The Python ceiling of each page without I/O: pages.Site's handler of
/good, /bad, / and the vote called in a loop over a data interface that
answers at once with fixed stickers (the 2017 article's "1M dummy
objects"). Prints one JSON line: {page: {"renders", "seconds"}}.

    python -m bench.ceilings.renders [--seconds S] [--packs N]
"""
import argparse
import asyncio
import json
import sys
import time

import dataset
from data_interface import DataInterface, Stats, Sticker, VoteOutcome
from pages import Request, Site
from pages.http import SESSION_COOKIE, ballot_tokens, new_session
from runtime.engines import new_loop
from runtime.settings import DEFAULTS
from . import RANKED_COUNT

BATCH = 100     # calls between two turns of the loop (visits get written)


class FixedData(DataInterface):
    """Every call answers at once, from stickers given at the start."""

    def __init__(self, stickers):
        self.stickers = stickers

    async def start(self):
        pass

    async def close(self):
        pass

    async def record_visits(self, visits):
        pass

    async def sticker_pair(self, session, tokens, ttl):
        return self.stickers[:2]

    async def cast_vote(self, session, win_token, lose_token):
        return VoteOutcome.OK

    async def top_stickers(self, count):
        return self.stickers[:count]

    async def bottom_stickers(self, count):
        return self.stickers[-count:]

    async def stats(self):
        return Stats(1, len(self.stickers), 0, 0, 0, 0, 0)

    async def packs(self):
        return []

    async def pack(self, name):
        return None

    async def sticker(self, pack, sticker_id):
        return None

    async def expire(self):
        return 0, 0

    async def load_batch(self, packs, stickers):
        return 0


def requests(site):
    """page -> (handler, request): a first visit, as wrk makes them; the
    vote with a session cookie and a well-formed ballot pair."""
    handler = {(r.method, r.path): r.handler for r in site.routes()}
    session = new_session()
    cookies = {SESSION_COOKIE: site.sessions.cookie(session)}
    form = ('win=%s&lose=%s' % ballot_tokens()).encode()

    def request(method, path, cookies=None, body=b''):
        return Request(method, path, cookies or {}, '127.0.0.1', 'bench',
                       body)
    return {
        'good': (handler['GET', '/good'], request('GET', '/good')),
        'bad': (handler['GET', '/bad'], request('GET', '/bad')),
        'index': (handler['GET', '/'], request('GET', '/')),
        'vote': (handler['POST', '/'], request('POST', '/', cookies, form)),
    }


async def renders(seconds, packs):
    chosen = dataset.generate(packs=packs)
    titles = {p.name: p.title for p in chosen.packs}
    stickers = [Sticker(*(list(s) + [titles[s.pack]]))
                for s in chosen.stickers[:RANKED_COUNT * 2]]
    site = Site(FixedData(stickers), DEFAULTS)
    found = {}
    for page, (handler, request) in requests(site).items():
        status = (await handler(request)).status
        if status != 200:
            raise RuntimeError('%s answered %d' % (page, status))
        done, started = 0, time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            for _ in range(BATCH):
                await handler(request)
            done += BATCH
            await asyncio.sleep(0)
        found[page] = {'renders': done,
                       'seconds': time.perf_counter() - started}
    await site.visits.close()
    return found


def main(argv=None):
    p = argparse.ArgumentParser(prog='python -m bench.ceilings.renders')
    p.add_argument('--seconds', type=float, default=2.0)
    p.add_argument('--packs', type=int, default=DEFAULTS.packs)
    args = p.parse_args(argv)
    loop = new_loop('uvloop')
    asyncio.set_event_loop(loop)
    print(json.dumps(loop.run_until_complete(
        renders(args.seconds, args.packs))))
    return 0


if __name__ == '__main__':
    sys.exit(main())
