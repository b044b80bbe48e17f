"""What the PostgreSQL drivers (asyncpg_data, psycopg_data) share: the
schema and its statements, the session settings, applying the schema, and
the DataInterface itself. Each operation is one statement run by the
driver's _query(kind, sql, *args), kind one of 'fetch' (the rows),
'fetchrow' (the first row or None), 'fetchval' (its first column) and
'execute'; parameters are written $1, $2, ... (asyncpg's way)."""
import abc
import hashlib
import json
import os
from urllib.parse import urlsplit

from .. import (REFUSED, DataInterface, DataUnavailable, Stats, pack_of,
                packs_of, sticker_of, stickers_of)

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       'schema.sql'), encoding='utf-8') as _f:
    SCHEMA = _f.read()
SCHEMA_DIGEST = hashlib.sha1(SCHEMA.encode('utf-8')).hexdigest()

SCHEMA_TIMEOUT = 60.0   # may wait for other processes or running queries
# The ranked lists, with the count written in (1..100, checked first): a
# statement without parameters keeps its one plan, the walk down the rating
# index; with LIMIT $1 PostgreSQL would plan every call anew.
RANKED = {
    True: 'SELECT * FROM sticker_cards ORDER BY rating DESC, id DESC LIMIT %d',
    False: 'SELECT * FROM sticker_cards ORDER BY rating, id LIMIT %d'}
EXPIRE_BATCH = 1000   # rows of each table per transaction, as in app.lua
POSITION = ("SELECT (CASE WHEN pg_is_in_recovery() THEN "
            "pg_last_wal_replay_lsn() ELSE pg_current_wal_flush_lsn() END "
            "- '0/0')::bigint")
# The tables are small enough to stay cached: with the default cost of a
# random page (4, for spinning disks) the planner would rather scan all the
# packs than probe their index for one title.
SETTINGS = {'application_name': 'stickers', 'random_page_cost': '1.1'}


def text(value):
    """PostgreSQL text holds neither NUL nor lone surrogates: replace them as
    pages.http.clean_text does (a key with them then matches nothing)."""
    return value.replace('\x00', '\ufffd').encode(
        'utf-8', 'replace').decode('utf-8')


async def apply_schema(conn):
    """Run schema.sql unless this very text was the last one applied; the
    advisory lock serialises processes that start at the same time. `conn`:
    an asyncpg connection, or one with its transaction(), fetchval() and
    execute(..., timeout=)."""
    async with conn.transaction():
        await conn.execute(
            "SELECT pg_advisory_xact_lock(hashtext('sticker site schema'))",
            timeout=SCHEMA_TIMEOUT)
        if await conn.fetchval(
                "SELECT to_regclass('schema_digest') IS NOT NULL"):
            if await conn.fetchval(
                    'SELECT digest FROM schema_digest') == SCHEMA_DIGEST:
                return False
        await conn.execute(SCHEMA, timeout=SCHEMA_TIMEOUT)
        await conn.execute('DELETE FROM schema_digest')
        await conn.execute('INSERT INTO schema_digest VALUES ($1)',
                           SCHEMA_DIGEST)
        return True


def why(e, timeout):
    """What a failed connect says; a timeout says nothing of itself."""
    return str(e) or 'no answer within %g s' % timeout


class ByDsn:
    """A PostgreSQL layer named by its DSN (self.dsn)."""

    @property
    def address(self):
        """Its DSN: where it connects, as the other drivers' address."""
        return self.dsn

    def __str__(self):
        u = urlsplit(self.dsn)    # without the password
        return '%s:%s%s' % (u.hostname, u.port or 5432, u.path)


class PostgresCalls(ByDsn, DataInterface):
    """A pool of min_size..max_size connections; connects, acquires and
    queries give up after `timeout` seconds with DataUnavailable. A
    subclass gives start(), close(), acquire() and _query()."""

    sweeps_itself = False

    def __init__(self, dsn, min_size=4, max_size=16, timeout=3.0,
                 replica=False):
        """replica: a hot standby's DSN (its schema is the primary's)."""
        self.dsn = dsn
        self.replica = replica
        self.min_size, self.max_size = min_size, max_size
        self.timeout = timeout
        self._pool = None

    @abc.abstractmethod
    def acquire(self):
        """`async with data.acquire() as conn`: a connection of the pool,
        with asyncpg's transaction(), fetch(), fetchrow(), fetchval() and
        execute() (tests, the schema)."""

    @abc.abstractmethod
    async def _query(self, kind, sql, *args):
        """Run one statement; DataUnavailable if it fails."""

    async def record_visits(self, visits):
        if visits:
            await self._query(
                'fetchval', 'SELECT record_visits($1, $2, $3)',
                [text(v.session) for v in visits],
                [text(v.ip) for v in visits],
                [text(v.user_agent) for v in visits])

    async def sticker_pair(self, session, tokens, ttl):
        return stickers_of(await self._query(
            'fetch', 'SELECT * FROM sticker_pair($1, $2, $3, $4)',
            text(session), text(tokens[0]), text(tokens[1]), ttl))

    async def cast_vote(self, session, win_token, lose_token):
        return await self._query(
            'fetchval', 'SELECT cast_vote($1, $2, $3)',
            text(session), text(win_token), text(lose_token))

    async def top_stickers(self, count):
        return await self._ranked(count, True)

    async def bottom_stickers(self, count):
        return await self._ranked(count, False)

    async def _ranked(self, count, best):
        if type(count) is not int or not 1 <= count <= 100:
            raise DataUnavailable('%s: count must be an integer in 1..100, '
                                  'not %.40r' % (REFUSED, count))
        return stickers_of(await self._query('fetch', RANKED[best] % count))

    async def stats(self):
        return Stats(*await self._query('fetchval', 'SELECT site_stats()'))

    async def position(self):
        """How far this server has come in the primary's log (bytes of
        WAL): a standby's replayed, a primary's flushed (the most a standby
        can have been sent)."""
        return await self._query('fetchval', POSITION)

    async def connection_limit(self):
        """The connections the server takes from roles like the site's."""
        return await self._query(
            'fetchval', "SELECT current_setting('max_connections')::int - "
            "current_setting('superuser_reserved_connections')::int")

    async def packs(self):
        return packs_of(await self._query(
            'fetch', 'SELECT * FROM list_packs()'))

    async def pack(self, name):
        return pack_of(await self._query(
            'fetchrow', 'SELECT * FROM pack_stickers($1)', text(name)))

    async def sticker(self, pack, sticker_id):
        if not 0 < sticker_id < 2 ** 31:   # ids are 1..N, N an int
            return None
        return sticker_of(await self._query(
            'fetchrow', 'SELECT * FROM get_sticker($1, $2)',
            text(pack), sticker_id))

    async def expire(self):
        """In batches, each its own transaction, as the Tarantool sweep; the
        limits are the database's (table `limits`)."""
        removed = [0, 0]
        while True:
            batch = await self._query(
                'fetchval', 'SELECT expire($1)', EXPIRE_BATCH)
            removed = [removed[0] + batch[0], removed[1] + batch[1]]
            if max(batch) < EXPIRE_BATCH:
                return tuple(removed)

    async def forget_visitors(self):
        # The owner's: TRUNCATE leaves no dead rows for autovacuum.
        counted = await self._query(
            'fetchrow', 'SELECT (SELECT count(*) FROM ballots),'
            ' (SELECT count(*) FROM sessions)')
        await self._query('execute', 'TRUNCATE ballots, sessions')
        return counted[0], counted[1]

    async def load_batch(self, packs, stickers):
        return await self._query('fetchval', 'SELECT load_stickers($1, $2)',
                                 json.dumps(packs), json.dumps(stickers))

    async def load(self, dataset):
        inserted = await super().load(dataset)
        # Fresh statistics, so that plans cached from now on fit the data.
        await self._query('execute', 'ANALYZE stickers, packs')
        return inserted
