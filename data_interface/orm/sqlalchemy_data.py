"""DataInterface on PostgreSQL through SQLAlchemy 2's asyncio ORM, written
as SQLAlchemy's own documentation writes it: the mapped classes of
models.py, 2.0-style select(), one AsyncSession per call from an
async_sessionmaker made once at start, `async with session.begin()` around
what must be atomic. The semantics are those of ../postgres/schema.sql's
functions, computed here in Python and plain statements instead of in
PL/pgSQL: arguments are checked before any statement (DataUnavailable with
REFUSED), a vote deletes its two ballots (DELETE ... RETURNING, which locks
them) and rolls back unless they form one unexpired pair of its session,
then moves the counters with UPDATE ... SET votes = votes + 1.

Its tables live in their own PostgreSQL schema (models.SCHEMA), made by
the loader's account (the owner) at its start; the site's account may read
them and write only ballots, sessions and the counters' columns.
"""
import asyncio
import functools
import random
import re

import asyncpg
from sqlalchemy import (BigInteger, case, cast, delete, func, insert,
                        literal_column, select, text, update)
from sqlalchemy.dialects.postgresql import insert as upsert
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.schema import CreateSchema

import data_interface as di
from .. import MAX_VISITS, REFUSED, DataInterface, DataUnavailable
from ..address import APP_USER
from ..postgres.asyncpg_data import connect
from ..postgres.common import ByDsn, text as clean, why
from .models import (COUNTER_ROWS, SCHEMA, Ballot, Base, Counter, Limits,
                     Pack, SiteSession, Sticker)

UUID = re.compile(r'[0-9a-f-]{36}\Z')
TOKEN = re.compile(r'[A-Za-z0-9_-]{22}\Z')
# The database's clock, in Unix seconds, as schema.sql's functions read it.
NOW = func.date_part('epoch', func.now())
# The counters' row of this connection (see models.COUNTER_ROWS).
OWN_COUNTER = 1 + func.pg_backend_pid() % COUNTER_ROWS
TITLE = func.coalesce(Pack.title, Sticker.pack)
EXPIRE_BATCH = 1000   # rows of each table per transaction, as schema.sql
# Every failure of the database, the link or the pool (SQLAlchemy wraps
# asyncpg's errors as DBAPIError; its pool's wait is its TimeoutError): none
# becomes a 500.
UNAVAILABLE = (SQLAlchemyError, OSError, asyncio.TimeoutError,
               asyncpg.PostgresError, asyncpg.InterfaceError)
# What the site's account may do in the schema: read it all, write what
# pages write. Loading, forgetting visitors and the limits are the owner's.
GRANTS = (
    'GRANT USAGE ON SCHEMA {s} TO {app}',
    'GRANT SELECT ON ALL TABLES IN SCHEMA {s} TO {app}',
    'GRANT INSERT, UPDATE, DELETE ON {s}.ballots, {s}.sessions TO {app}',
    'GRANT UPDATE (rating, votes_plus, votes_minus) ON {s}.stickers TO {app}',
    'GRANT UPDATE (users, views, votes) ON {s}.counters TO {app}',
)


class _Refused(Exception):
    """A vote that changes nothing: its transaction is rolled back."""

    def __init__(self, outcome):
        super().__init__(outcome)
        self.outcome = outcome


def refuse(what):
    raise DataUnavailable('%s: %s' % (REFUSED, what))


def checked_text(value, limit, what):
    if not isinstance(value, str):
        refuse(what)
    value = clean(value)
    if len(value.encode('utf-8')) > limit:
        refuse(what)
    return value


def checked_session(value):
    if not isinstance(value, str) or not UUID.match(value):
        refuse('session must be a uuid of 36 characters')
    return value


def checked_token(value):
    if not isinstance(value, str) or not TOKEN.match(value):
        refuse('ballot tokens must be 22 URL-safe characters')
    return value


def checked_pack(name):
    return checked_text(name, 64,
                        'pack name must be UTF-8 text of at most 64 bytes')


def checked_count(count):
    if type(count) is not int or not 1 <= count <= 100:
        refuse('count must be an integer in 1..100, not %.40r' % (count,))
    return count


def card(sticker, title):
    return di.Sticker(sticker.id, sticker.pack, sticker.image, sticker.rating,
                      sticker.votes_plus, sticker.votes_minus, title)


def first_at(sticker_id):
    """The first existing id at or above sticker_id: one probe of the
    primary key (ids may have gaps)."""
    return (select(Sticker.id).where(Sticker.id >= sticker_id)
            .order_by(Sticker.id).limit(1).scalar_subquery())


def guarded(method):
    """Run a call with every database error as DataUnavailable."""
    @functools.wraps(method)
    async def call(self, *args):
        if self._sessions is None:
            raise DataUnavailable('PostgreSQL at %s: not connected' % self)
        try:
            return await method(self, *args)
        except UNAVAILABLE as e:
            raise DataUnavailable('PostgreSQL at %s: %s: %s' % (
                self, type(e).__name__, ' '.join(str(e).split())[:500])) from e
    return call


class SqlalchemyData(ByDsn, DataInterface):
    """A pool of up to max_size connections (opened as needed, kept);
    connects, waits for a connection and statements give up after
    `timeout` seconds with DataUnavailable."""

    sweeps_itself = False
    # Its tables are made by the owner's start (runtime/databases).
    schema_of_its_own = True

    def __init__(self, dsn, min_size=4, max_size=16, timeout=3.0,
                 replica=False):
        if replica:
            raise RuntimeError('--replicas: the sqlalchemy driver reads '
                               'from the primary only')
        self.dsn = dsn
        self.min_size, self.max_size = min_size, max_size
        self.timeout = timeout
        self._engine = self._sessions = None

    async def _connect(self):
        return await connect(self.dsn, self.timeout)

    async def start(self):
        # The URL names the dialect; _connect opens its connections.
        self._engine = create_async_engine(
            make_url(self.dsn).set(drivername='postgresql+asyncpg'),
            async_creator=self._connect, pool_size=self.max_size,
            max_overflow=0, pool_timeout=self.timeout)
        self._sessions = async_sessionmaker(self._engine,
                                            expire_on_commit=False)
        try:
            async with self._engine.begin() as conn:
                if await conn.scalar(select(func.to_regclass(
                        '%s.limits' % SCHEMA))) is None:
                    await self._create_schema(conn)
        except BaseException as e:
            await self.close()
            if isinstance(e, UNAVAILABLE):
                raise DataUnavailable(
                    'cannot start on PostgreSQL at %s (its schema %s is made '
                    'by the loader\'s account): %s' % (
                        self, SCHEMA, why(e, self.timeout))) from e
            raise

    async def _create_schema(self, conn):
        """The tables, their first rows and the site's grants; one process
        at a time."""
        # Another process making it meanwhile: this one waits, then each
        # step finds its part there.
        await conn.execute(
            select(func.pg_advisory_xact_lock(func.hashtext(SCHEMA))))
        await conn.execute(CreateSchema(SCHEMA, if_not_exists=True))
        await conn.run_sync(Base.metadata.create_all)
        await conn.execute(upsert(Counter).values(
            [{'id': i} for i in range(1, COUNTER_ROWS + 1)])
            .on_conflict_do_nothing())
        await conn.execute(upsert(Limits).values(one=True)
                           .on_conflict_do_nothing())
        if await conn.scalar(text(
                'SELECT current_user <> :app AND EXISTS '
                '(SELECT FROM pg_roles WHERE rolname = :app)'),
                {'app': APP_USER}):
            for grant in GRANTS:
                await conn.execute(text(grant.format(s=SCHEMA, app=APP_USER)))

    async def close(self):
        if self._engine is not None:
            engine, self._engine, self._sessions = self._engine, None, None
            await engine.dispose()

    @guarded
    async def record_visits(self, visits):
        """Sessions upserted in uuid order (concurrent batches wait for each
        other instead of deadlocking), then the counters; one transaction.
        Visits may be lists of (session, ip, user agent)."""
        if not isinstance(visits, (list, tuple)) or len(visits) > MAX_VISITS:
            refuse('visits: at most %d in a batch' % MAX_VISITS)
        latest = {}
        for v in visits:
            if len(v) != 3:
                refuse('a visit is a session, an ip and a user agent')
            session = checked_session(v[0])
            ip = checked_text(v[1], 64, 'an ip of at most 64 bytes')
            agent = checked_text(v[2], 256, 'a user agent of at most 256 '
                                 'bytes')
            count = latest[session][2] + 1 if session in latest else 1
            latest[session] = (ip, agent, count)
        if not latest:
            return 0
        # ORM bulk upsert: one cached statement, the rows its parameters
        # (a statement of many VALUES rows would be compiled anew for
        # every batch); a new session's last_seen is the column's default.
        statement = upsert(SiteSession)
        statement = statement.on_conflict_do_update(
            index_elements=[SiteSession.uuid],
            set_={'last_seen': NOW,
                  'visits': SiteSession.visits + statement.excluded.visits,
                  'ip': statement.excluded.ip,
                  'user_agent': statement.excluded.user_agent},
        ).returning(literal_column('xmax = 0'))    # true: inserted
        rows = [{'uuid': session, 'visits': count, 'ip': ip,
                 'user_agent': agent}
                for session, (ip, agent, count) in sorted(latest.items())]
        async with self._sessions() as session, session.begin():
            inserted = await session.scalars(statement, rows)
            users = sum(1 for new in inserted if new)
            await session.execute(
                update(Counter).where(Counter.id == OWN_COUNTER)
                .values(users=Counter.users + users,
                        views=Counter.views + len(visits))
                .execution_options(synchronize_session=False))
        return len(visits)

    @guarded
    async def sticker_pair(self, session, tokens, ttl):
        """As schema.sql's sticker_pair: two random keys up to the largest
        id, each the first id at or above it; the second, when it is the
        first, the next id (wrapping around)."""
        session = checked_session(session)
        tokens = [checked_token(t) for t in tokens]
        if len(tokens) != 2 or tokens[0] == tokens[1]:
            refuse('the two ballot tokens must differ')
        if type(ttl) not in (int, float) or not 0 < ttl <= 3600:
            refuse('ttl must be a number of seconds in (0, 3600]')
        cards = select(Sticker, TITLE).outerjoin(
            Pack, Pack.name == Sticker.pack)
        async with self._sessions() as s, s.begin():
            top, now = (await s.execute(select(func.max(Sticker.id), NOW))
                        ).one()
            if top is None:
                raise DataUnavailable('fewer than two stickers loaded')
            # Both picks and their cards in one select (the first pick's
            # row says so); one row when they are the same sticker.
            first = first_at(random.randint(1, top))
            picked = (await s.execute(
                cards.add_columns(Sticker.id == first).where(Sticker.id.in_(
                    (first, first_at(random.randint(1, top))))))).all()
            pair = [card(sticker, title) for sticker, title, _ in sorted(
                picked, key=lambda row: not row[2])]
            if len(pair) == 1:
                after = (await s.execute(cards.where(Sticker.id > pair[0].id)
                                         .order_by(Sticker.id).limit(1))
                         ).first() or (await s.execute(
                             cards.order_by(Sticker.id).limit(1))).first()
                if after is None or after[0].id == pair[0].id:
                    raise DataUnavailable('fewer than two stickers loaded')
                pair.append(card(*after))
            # ORM bulk INSERT: plain values, one cached statement.
            await s.execute(insert(Ballot), [
                {'token': token, 'session': session, 'sticker': sticker.id,
                 'partner': partner, 'deadline': now + ttl}
                for token, partner, sticker in (
                    (tokens[0], tokens[1], pair[0]),
                    (tokens[1], tokens[0], pair[1]))])
        return pair

    @guarded
    async def cast_vote(self, session, win_token, lose_token):
        session = checked_session(session)
        win, lose = checked_token(win_token), checked_token(lose_token)
        if win == lose:
            return di.VoteOutcome.UNKNOWN
        try:
            async with self._sessions() as s, s.begin():
                # Both ballots consumed at once: a concurrent vote with
                # either waits for this one's end, then finds them gone (or
                # back, after a rollback).
                consumed = (await s.execute(
                    delete(Ballot).where(Ballot.token.in_((win, lose)))
                    .returning(Ballot, NOW))).all()
                ballots = {ballot.token: ballot for ballot, _ in consumed}
                now = consumed[0][1] if consumed else None
                outcome = judge(ballots.get(win), ballots.get(lose), session,
                                now)
                if outcome != di.VoteOutcome.OK:
                    raise _Refused(outcome)
                # This commit waits for the WAL flush (the local cluster
                # runs with synchronous_commit off): no counted vote is
                # lost in a crash.
                await s.execute(text('SET LOCAL synchronous_commit = on'))
                winner, loser = ballots[win].sticker, ballots[lose].sticker
                # One statement: both rows locked in the order of the
                # primary key's scan, the same for every vote.
                won = Sticker.id == winner
                await s.execute(
                    update(Sticker).where(Sticker.id.in_((winner, loser)))
                    .values(rating=Sticker.rating + case((won, 1), else_=-1),
                            votes_plus=Sticker.votes_plus
                            + case((won, 1), else_=0),
                            votes_minus=Sticker.votes_minus
                            + case((won, 0), else_=1))
                    .execution_options(synchronize_session=False))
                await s.execute(
                    update(Counter).where(Counter.id == OWN_COUNTER)
                    .values(votes=Counter.votes + 1)
                    .execution_options(synchronize_session=False))
        except _Refused as refused:
            return refused.outcome
        return di.VoteOutcome.OK

    async def top_stickers(self, count):
        return await self._ranked(checked_count(count), True)

    async def bottom_stickers(self, count):
        return await self._ranked(checked_count(count), False)

    @guarded
    async def _ranked(self, count, best):
        order = ((Sticker.rating.desc(), Sticker.id.desc()) if best
                 else (Sticker.rating, Sticker.id))
        async with self._sessions() as s:
            rows = await s.execute(
                select(Sticker, TITLE)
                .outerjoin(Pack, Pack.name == Sticker.pack)
                .order_by(*order).limit(count))
            return [card(sticker, title) for sticker, title in rows]

    @guarded
    async def stats(self):
        def count(model):
            return select(func.count()).select_from(model).scalar_subquery()
        async with self._sessions() as s:
            row = (await s.execute(select(
                count(Pack), count(Sticker),
                cast(func.sum(Counter.users), BigInteger),
                cast(func.sum(Counter.views), BigInteger),
                cast(func.sum(Counter.votes), BigInteger),
                count(SiteSession), count(Ballot)))).one()
        return di.Stats(*row)

    @guarded
    async def packs(self):
        stickers = (select(func.count()).where(Sticker.pack == Pack.name)
                    .scalar_subquery())
        async with self._sessions() as s:
            rows = await s.execute(select(Pack.name, Pack.title, stickers)
                                   .order_by(Pack.name.collate('C')))
            return [di.Pack(*row) for row in rows]

    async def pack(self, name):
        return await self._pack(checked_pack(name))

    @guarded
    async def _pack(self, name):
        async with self._sessions() as s:
            rows = (await s.execute(
                select(Pack, Sticker)
                .outerjoin(Sticker, Sticker.pack == Pack.name)
                .where(Pack.name == name).order_by(Sticker.id))).all()
        if not rows:
            return None
        pack = rows[0][0]
        return di.Pack(pack.name, pack.title, [
            card(sticker, pack.title) for _, sticker in rows
            if sticker is not None])

    async def sticker(self, pack, sticker_id):
        pack = checked_pack(pack)
        if type(sticker_id) is not int:
            refuse('sticker id must be an integer')
        if not 0 < sticker_id < 2 ** 31:   # ids are 1..N, N an int
            return None
        return await self._sticker(pack, sticker_id)

    @guarded
    async def _sticker(self, pack, sticker_id):
        async with self._sessions() as s:
            row = (await s.execute(
                select(Sticker, TITLE)
                .outerjoin(Pack, Pack.name == Sticker.pack)
                .where(Sticker.id == sticker_id, Sticker.pack == pack))
                ).first()
        return None if row is None else card(*row)

    @guarded
    async def expire(self):
        """By the limits the database keeps (Limits, the owner's)."""
        async with self._sessions() as s:
            limits = await s.scalar(select(Limits))
        if limits is None:
            raise DataUnavailable('PostgreSQL at %s: no row in %s.limits'
                                  % (self, SCHEMA))
        return await self.expire_below(
            limits.session_ttl, limits.max_sessions, limits.max_ballots)

    @guarded
    async def expire_below(self, session_ttl, max_sessions, max_ballots):
        """The sweep with these limits, in batches, each its own
        transaction: ballots past their deadline and sessions idle longer
        than session_ttl, then the oldest beyond the caps. Rows locked by
        a vote or a visit in progress wait for the next sweep. Returns
        (ballots_removed, sessions_removed)."""
        removed = [0, 0]
        while True:
            async with self._sessions() as s, s.begin():
                ballots = await sweep(s, Ballot, Ballot.deadline, 0,
                                      max_ballots)
                sessions = await sweep(s, SiteSession, SiteSession.last_seen,
                                       session_ttl, max_sessions)
            removed = [removed[0] + ballots, removed[1] + sessions]
            if max(ballots, sessions) < EXPIRE_BATCH:
                return tuple(removed)

    @guarded
    async def forget_visitors(self):
        # The owner's: TRUNCATE leaves no dead rows for autovacuum.
        def count(model):
            return select(func.count()).select_from(model).scalar_subquery()
        async with self._sessions() as s, s.begin():
            counted = (await s.execute(select(count(Ballot),
                                              count(SiteSession)))).one()
            await s.execute(text('TRUNCATE %s.ballots, %s.sessions'
                                 % (SCHEMA, SCHEMA)))
        return tuple(counted)

    @guarded
    async def load_batch(self, packs, stickers):
        """The owner's; rows as the data set's (name, title) and (id, pack,
        image, rating, votes_plus, votes_minus)."""
        if not all(isinstance(rows, (list, tuple))
                   for rows in (packs, stickers)):
            refuse('packs and stickers must be lists of rows')
        async with self._sessions() as s, s.begin():
            # Flushed before the call returns, as a vote.
            await s.execute(text('SET LOCAL synchronous_commit = on'))
            if packs:
                await s.execute(upsert(Pack).values([
                    {'name': name, 'title': title} for name, title in packs])
                    .on_conflict_do_nothing())
            if not stickers:
                return 0
            inserted = await s.scalars(upsert(Sticker).values([
                dict(zip(('id', 'pack', 'image', 'rating', 'votes_plus',
                          'votes_minus'), row)) for row in stickers])
                .on_conflict_do_nothing().returning(Sticker.id))
            return len(inserted.all())

    async def load(self, dataset):
        inserted = await super().load(dataset)
        await self._analyze()
        return inserted

    @guarded
    async def _analyze(self):
        # Fresh statistics, so that plans from now on fit the data.
        async with self._sessions() as s, s.begin():
            await s.execute(text('ANALYZE %s.stickers, %s.packs'
                                 % (SCHEMA, SCHEMA)))

    async def _call(self, name, args):
        """An operation by the name and arguments of schema.sql's function
        (the contract suite calls them with bad arguments)."""
        if name == 'sticker_pair':
            session, a, b, ttl = args
            return await self.sticker_pair(session, (a, b), ttl)
        if name == 'cast_vote':
            return await self.cast_vote(*args)
        if name in ('top_stickers', 'bottom_stickers'):
            return await getattr(self, name)(*args)
        if name == 'pack_stickers':
            return await self.pack(*args)
        if name == 'get_sticker':
            pack, sticker_id = args
            if type(sticker_id) is not int or sticker_id < 0:
                refuse('sticker id must be an integer in 0..2147483647')
            return await self.sticker(pack, sticker_id)
        refuse('no operation %.40r' % (name,))


def judge(win, lose, session, now):
    """The outcome of a vote with these ballots (None: not found), as
    schema.sql's cast_vote decides it."""
    if win is None or lose is None:
        return di.VoteOutcome.UNKNOWN
    if win.partner != lose.token or lose.partner != win.token:
        return di.VoteOutcome.NOT_PAIR
    if win.session != session:
        return di.VoteOutcome.FOREIGN
    if win.deadline < now:
        return di.VoteOutcome.EXPIRED
    return di.VoteOutcome.OK


async def sweep(s, model, age, ttl, cap):
    """Delete up to EXPIRE_BATCH rows of `model` older than ttl seconds by
    `age` (a time: a deadline, ttl 0; a last visit), then the oldest beyond
    `cap`, within the same batch; returns how many went."""
    key = model.__mapper__.primary_key[0]

    async def remove(condition, limit):
        oldest = (select(key).where(*condition).order_by(age).limit(limit)
                  .with_for_update(skip_locked=True))
        result = await s.execute(delete(model).where(key.in_(oldest))
                                 .execution_options(synchronize_session=False))
        return result.rowcount

    gone = await remove([age < NOW - ttl], EXPIRE_BATCH)
    over = await s.scalar(select(func.count()).select_from(model)) - cap
    if over > 0 and gone < EXPIRE_BATCH:
        gone += await remove([], min(EXPIRE_BATCH - gone, over))
    return gone
