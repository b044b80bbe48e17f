"""One database call of a page, made again and again through a
DataInterface, each result checked: what the driver and HTTP children
time. 3.7 compatible."""
import os

from data_interface import DataUnavailable, Visit, VoteOutcome
from pages.http import ballot_tokens, new_session
from . import BALLOT_TTL, RANKED_COUNT, SKIP_CALL, VISIT_BATCH


class Caller:
    """call() makes one call of `name` and counts it as done (its result
    shows the work), bad (it does not) or failed (DataUnavailable)."""

    def __init__(self, data, name):
        self.data, self.name = data, name
        self.make = getattr(self, '_' + name)
        self.skip = bool(os.environ.get(SKIP_CALL))
        self.done = self.bad = self.failed = 0
        self.session = new_session()
        self.pairs = []         # issued, not voted yet: (tokens, winner)
        self.last = None        # the last pair issued
        self.winner = None      # the sticker of the last vote counted
        self.visit = Visit(None, '127.0.0.1', 'bench.py --ceilings')

    async def call(self):
        """True when the call did its work."""
        try:
            ok = False if self.skip else await self.make()
        except DataUnavailable:
            self.failed += 1
            return False
        if ok:
            self.done += 1
        else:
            self.bad += 1
        return ok

    async def _ranked(self):
        rows = await self.data.top_stickers(RANKED_COUNT)
        keys = [(s.rating, s.id) for s in rows]
        return len(rows) == RANKED_COUNT and keys == sorted(keys, reverse=True)

    async def _issue(self):
        """(tokens, the sticker the first one votes for), or None."""
        tokens = ballot_tokens()
        a, b = await self.data.sticker_pair(self.session, tokens, BALLOT_TTL)
        self.last = tokens, a
        return (tokens, a) if a.id != b.id else None

    async def _pair(self):
        return await self._issue() is not None

    async def _vote(self):
        """A vote of a pair issued before, then the next pair: the vote
        page's calls."""
        tokens, winner = self.pairs.pop() if self.pairs else \
            await self._issue()
        outcome = await self.data.cast_vote(self.session, *tokens)
        if outcome == VoteOutcome.OK:
            self.winner = winner
        issued = await self._issue()
        if issued:
            self.pairs.append(issued)
        return outcome == VoteOutcome.OK and issued is not None

    async def _visits(self):
        await self.data.record_visits([
            self.visit._replace(session=new_session())
            for _ in range(VISIT_BATCH)])
        return True

    async def _stats(self):
        s = await self.data.stats()
        return s.stickers > 0 and s.packs > 0

    async def evidence(self):
        """What the database shows once the calls are over: for the pair,
        whether its last ballots exist (a vote with them counts); for the
        vote, whether the last winner's votes moved."""
        try:
            if self.name == 'pair' and self.last:
                return {'last_pair_vote': await self.data.cast_vote(
                    self.session, *self.last[0])}
            if self.name == 'vote' and self.winner:
                s = await self.data.sticker(self.winner.pack, self.winner.id)
                return {'winner_votes_moved': s is not None
                        and s.votes_plus > self.winner.votes_plus}
        except DataUnavailable as e:
            return {'unavailable': str(e)}
        return {}

    def counts(self):
        return {'done': self.done, 'bad': self.bad, 'failed': self.failed}


def data_of(driver, address):
    """An unstarted DataInterface: driver 'blocking' at a Tarantool address
    ('user:password@host:port'), else a driver of the database table named
    by its module ('asynctnt', 'aiotarantool', 'asyncpg') at an address its
    database parses, in its first mode (one connection; asyncpg: the site's
    pool)."""
    if driver == 'blocking':
        from data_interface.address import parse_tarantool
        from .blocking import BlockingTarantool
        return BlockingTarantool(parse_tarantool(address))
    from runtime.databases import table
    found = next(d for d in table.DRIVERS if d.modules[0] == driver)
    database = table.BY_NAME[found.database]
    return database.data(found, found.modes[0], database.parse(address))
