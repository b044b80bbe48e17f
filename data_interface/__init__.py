"""The one data interface the pages use, whatever database is behind it.

Every backend (Tarantool via asynctnt or aiotarantool, PostgreSQL via asyncpg
or psycopg, Redis via redis-py) implements `DataInterface` with the same
semantics; tests/test_contract.py holds them to it.
"""
import abc
import asyncio
import base64
import os
import socket
from collections import namedtuple

# A sticker as the pages see it; rating == votes_plus - votes_minus - offset
# is not assumed: the data set may start with any rating.
Sticker = namedtuple(
    'Sticker', 'id pack image rating votes_plus votes_minus pack_title')
Pack = namedtuple('Pack', 'name title stickers')
Stats = namedtuple(
    'Stats', 'packs stickers users views votes sessions ballots')
# Who is asking: the session uuid (a str) plus what the session record keeps.
Visit = namedtuple('Visit', 'session ip user_agent')


class VoteOutcome:
    """Result of cast_vote; only OK changes anything."""
    OK = 'ok'
    UNKNOWN = 'unknown'      # a token was never issued, or already used
    NOT_PAIR = 'not_pair'    # both exist but were not issued together
    FOREIGN = 'foreign'      # issued to another session
    EXPIRED = 'expired'      # past its deadline, not yet swept
    ALL = (OK, UNKNOWN, NOT_PAIR, FOREIGN, EXPIRED)


class DataUnavailable(Exception):
    """The database cannot serve the call (answer 503, retry later): it cannot
    be reached, or it failed on its side (out of memory, a refused argument).
    Each driver maps every database error to this, so none becomes a 500;
    what visitors send is validated by the pages before any call."""


class VoteUnknown(DataUnavailable):
    """A vote sent whose answer was lost (the link broke, no answer in
    time): it may have been counted. Sending it again is safe: its ballots
    count once."""


class PartlyWritten(DataUnavailable):
    """record_visits wrote some of its visits (a backend that writes them
    in several calls): `unwritten` holds the rest."""

    def __init__(self, message, unwritten):
        super().__init__(message)
        self.unwritten = unwritten


class NotSetUp(DataUnavailable):
    """The database lacks what the project installs in it (Redis: this
    version of its functions), and this account may not install it: the
    loader's may."""


# In the message of a DataUnavailable for an argument the database refused:
# a bug of the caller, which a retry would not mend.
REFUSED = 'bad argument'


# TCP keepalive on the drivers' sockets: a peer host gone (powered off, or
# a firewall that forgot the connection) is found in about 25 s idle, not
# 2 hours. A peer that answers TCP but no longer the protocol is found by
# each driver's own bound (docs/reliability.md).
KEEPALIVE = {getattr(socket, name): value for name, value in (
    ('TCP_KEEPIDLE', 10), ('TCP_KEEPINTVL', 5), ('TCP_KEEPCNT', 3))
    if hasattr(socket, name)}


def keep_alive(sock):
    """Turn TCP keepalive on for `sock` (None, or not TCP: nothing)."""
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in KEEPALIVE.items():
        sock.setsockopt(socket.IPPROTO_TCP, option, value)


async def cancel(task):
    """Cancel an asyncio task and wait until it has ended. Up to Python
    3.11, asyncio.wait_for returns its result when a cancel meets its
    end, and a task in a loop goes on: it is cancelled again until it
    ends. Its own error, if any, is raised here."""
    while not task.done():
        task.cancel()
        await asyncio.wait((task,), timeout=0.05)
    if not task.cancelled():
        task.result()


LOAD_BATCH = 2000   # stickers per call of load_batch
MAX_VISITS = 1000   # visits per call of record_visits


class DataInterface(abc.ABC):
    """What the pages need, nothing more. All methods are coroutines.

    Sessions and views move only by record_visits, which the pages call in
    batches after answering (pages.visits); the other calls leave them be.

    Sticker ids are positive integers, maybe with gaps. Arguments are
    bounded and the stored functions (PostgreSQL's driver, for the counts of
    its ranked selects) refuse anything else, as DataUnavailable with
    REFUSED in its message: sessions are
    uuids, tokens 22 URL-safe characters, ip at most 64 bytes of UTF-8, user
    agent 256, pack names 64, counts 1..100, ttls (0, 3600] seconds.

    Lists are ordered by (rating, id): top_stickers by rating desc then id
    desc, bottom_stickers by rating asc then id asc.

    Capabilities (class attributes), which the pages read:
    sweeps_itself: the database removes expired ballots and idle sessions on
        its own; if False the site calls expire() every refresh.
    writes_tables: the site's calls write the tables themselves (an ORM),
        not through the database's functions, so the site connects as the
        tables' owner, as the loader does (PostgreSQL).
    """
    sweeps_itself = False
    writes_tables = False

    def ballot_tokens(self, session):
        """Two new ballot tokens for a pair of `session` (a backend may
        make them name where it keeps them)."""
        return new_tokens()

    @abc.abstractmethod
    async def start(self):
        """Connect (or check that connecting works, for per-request modes)."""

    @abc.abstractmethod
    async def close(self):
        """Close what start() opened."""

    @abc.abstractmethod
    async def record_visits(self, visits):
        """In one transaction, for each Visit in order: upsert its session
        (last seen now, one visit more, its ip and user agent), count a view,
        and a user if the session was not there. At most MAX_VISITS."""

    @abc.abstractmethod
    async def sticker_pair(self, session, tokens, ttl):
        """Pick two different random stickers and issue them the two ballot
        tokens as one pair bound to session, valid for ttl seconds. Returns
        [Sticker, Sticker] in the order of tokens."""

    @abc.abstractmethod
    async def cast_vote(self, session, win_token, lose_token):
        """Atomically: check the two tokens form one unexpired pair issued to
        session, consume both, winner rating+1 votes_plus+1, loser rating-1
        votes_minus+1, server votes+1. Returns a VoteOutcome value. On a
        failure, DataUnavailable; a backend that can tell a vote sent and
        its answer lost (it may have run) from one that did not run raises
        VoteUnknown for the first (the Redis Cluster's)."""

    @abc.abstractmethod
    async def top_stickers(self, count):
        """Return the best `count` stickers, as rated now."""

    @abc.abstractmethod
    async def bottom_stickers(self, count):
        """Return the worst `count` stickers, as rated now."""

    @abc.abstractmethod
    async def stats(self):
        """Return Stats."""

    @abc.abstractmethod
    async def packs(self):
        """Return [Pack] with stickers as a count, ordered by name."""

    @abc.abstractmethod
    async def pack(self, name):
        """Return Pack with stickers as [Sticker] ordered by id, or None."""

    @abc.abstractmethod
    async def sticker(self, pack, sticker_id):
        """Return the Sticker with that id in that pack, or None."""

    @abc.abstractmethod
    async def expire(self):
        """Only where sweeps_itself is False: remove ballots past their
        deadline and idle sessions, then the oldest ones beyond the caps, by
        limits the database keeps. Returns (ballots_removed,
        sessions_removed)."""

    async def forget_visitors(self):
        """The loader's account only: remove every session and ballot, the
        counters kept (a benchmark starts each engine without the visitors
        of the one before). Returns (ballots_removed, sessions_removed)."""
        raise NotImplementedError(type(self).__name__)

    @abc.abstractmethod
    async def load_batch(self, packs, stickers):
        """Insert these packs and stickers (lists of field lists) where not
        there yet; returns the number of stickers inserted."""

    async def load(self, dataset):
        """Insert the packs and stickers of a dataset.DataSet that are not
        there yet (existing ratings are kept). Needs the admin account.
        Returns the number of stickers inserted."""
        packs = [list(p) for p in dataset.packs]
        inserted = 0
        for i in range(0, len(dataset.stickers), LOAD_BATCH):
            rows = [list(s) for s in dataset.stickers[i:i + LOAD_BATCH]]
            inserted += await self.load_batch(packs, rows)
            packs = []
        return inserted


def new_tokens():
    """Two random ballot tokens of 22 URL-safe characters (132 bits each),
    from one read of the system's generator."""
    text = base64.urlsafe_b64encode(os.urandom(33)).decode('ascii')
    return text[:22], text[22:]


# Records from the rows the stored functions return (the same fields, in the
# same order, on every backend).
def stickers_of(rows):
    return [Sticker(*row) for row in rows]


def sticker_of(row):
    return None if row is None else Sticker(*row)


def packs_of(rows):
    return [Pack(*row) for row in rows]


def pack_of(row):
    """A pack with its stickers: (name, title, [sticker rows])."""
    return None if row is None else Pack(row[0], row[1], stickers_of(row[2]))


class FunctionCalls(DataInterface):
    """A backend whose page operations are each one call of a stored
    function of the same name and arguments (Tarantool's app.lua, Redis's
    stickers.lua): a subclass gives _call(name, args) -> the function's
    result, and what differs (visits, loading, expiry)."""

    @abc.abstractmethod
    async def _call(self, name, args):
        """The function's result; DataUnavailable if the call fails."""

    async def sticker_pair(self, session, tokens, ttl):
        return stickers_of(await self._call('sticker_pair', [
            session, tokens[0], tokens[1], ttl]))

    async def cast_vote(self, session, win_token, lose_token):
        return await self._call('cast_vote', [session, win_token, lose_token])

    async def top_stickers(self, count):
        return stickers_of(await self._call('top_stickers', [count]))

    async def bottom_stickers(self, count):
        return stickers_of(await self._call('bottom_stickers', [count]))

    async def stats(self):
        return Stats(*await self._call('site_stats', []))

    async def packs(self):
        return packs_of(await self._call('list_packs', []))

    async def pack(self, name):
        return pack_of(await self._call('pack_stickers', [name]))

    async def sticker(self, pack, sticker_id):
        return sticker_of(await self._call('get_sticker', [pack, sticker_id]))
