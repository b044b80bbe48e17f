"""One contract for every DataInterface backend: same data, same answers."""
import asyncio
import secrets
import uuid

import pytest

from data_interface import DataUnavailable, Visit, VoteOutcome
from conftest import (configure_redis, load_small, small_data_set,
                      remove_postgres, start_postgres, start_redis,
                      start_tarantool)

import dataset
from plugins.backends import BACKENDS


@pytest.fixture
async def data(new_data):
    d = new_data()
    await d.start()
    yield d
    await d.close()


def visit(ip='127.0.0.1', user_agent='pytest'):
    return Visit(str(uuid.uuid4()), ip, user_agent)


def tokens():
    return secrets.token_urlsafe(16), secrets.token_urlsafe(16)


async def all_stickers(data):
    result = []
    for p in await data.packs():
        result.extend((await data.pack(p.name)).stickers)
    return result


async def issue(data, v, ttl=600):
    t = data.ballot_tokens(v.session)    # as the pages do
    pair = await data.sticker_pair(v.session, t, ttl)
    return t, pair


async def current(data, s):
    return await data.sticker(s.pack, s.id)


def database(data):
    """'tarantool', 'postgres', 'redis', 'rediscluster', 'orm' (PostgreSQL
    through SQLAlchemy's ORM, on tables of its own) or 'django_orm' (through
    Django's, on its own)."""
    return type(data).__module__.split('.')[1]


def is_tarantool(data):
    return database(data) == 'tarantool'


async def sweep(backend, session_ttl, max_sessions, max_ballots):
    """The database's own sweep with lowered limits, run as the admin
    (Tarantool, Redis) or the owner (PostgreSQL, in one transaction: other
    connections never see the lowered limits)."""
    admin = backend.admin()
    await admin.start()
    try:
        if is_tarantool(admin):
            return tuple(await admin._call(
                'expire', [session_ttl, max_sessions, max_ballots]))
        if database(admin) in ('redis', 'rediscluster', 'orm',
                               'django_orm'):
            return await admin.expire_below(session_ttl, max_sessions,
                                            max_ballots)
        async with admin.acquire() as conn, conn.transaction():
            saved = await conn.fetchrow(
                'SELECT session_ttl, max_sessions, max_ballots FROM limits')
            change = ('UPDATE limits SET session_ttl = $1, max_sessions = $2,'
                      ' max_ballots = $3')
            await conn.execute(change, session_ttl, max_sessions, max_ballots)
            removed = [0, 0]
            while True:
                batch = await conn.fetchval('SELECT expire(1000)')
                removed = [removed[0] + batch[0], removed[1] + batch[1]]
                if max(batch) < 1000:
                    break
            await conn.execute(change, *saved)
            return tuple(removed)
    finally:
        await admin.close()


# Page functions called directly, as a client of the database could.
SQL = {
    'sticker_pair': 'SELECT * FROM sticker_pair($1, $2, $3, $4)',
    'cast_vote': 'SELECT cast_vote($1, $2, $3)',
    'pack_stickers': 'SELECT * FROM pack_stickers($1)',
    'get_sticker': 'SELECT * FROM get_sticker($1, $2)',
}


async def call(data, name, *args):
    if database(data) != 'postgres':   # the Django ORM's: checked alike
        return await data._call(name, list(args))
    if name not in SQL:     # a select of PostgresData itself
        return await getattr(data, name)(*args)
    return await data._query('fetch', SQL[name], *args)


async def record(data, visits):
    """record_visits called directly, with visits as lists of anything."""
    if database(data) in ('tarantool', 'django_orm'):
        return await data._call('record_visits', [visits])
    if database(data) == 'redis':
        return await data._call('record_visits', [x for v in visits for x in v])
    if database(data) in ('rediscluster', 'orm'):
        return await data.record_visits(visits)
    return await data._query(
        'fetchval', 'SELECT record_visits($1, $2, $3)',
        *[[v[i] for v in visits] for i in range(3)])


async def test_catalogue_matches_loaded_data(data):
    expected = small_data_set()
    stats = await data.stats()
    assert (stats.packs, stats.stickers) == (len(expected.packs),
                                             len(expected.stickers))
    packs = await data.packs()
    assert [p.name for p in packs] == sorted(p.name for p in expected.packs)
    assert sum(p.stickers for p in packs) == len(expected.stickers)
    first = expected.stickers[0]
    s = await data.sticker(first.pack, first.id)
    assert (s.id, s.pack, s.image) == (first.id, first.pack, first.image)
    title = {p.name: p.title for p in expected.packs}[first.pack]
    assert s.pack_title == title
    pack = await data.pack(first.pack)
    assert [x.id for x in pack.stickers] == sorted(
        x.id for x in expected.stickers if x.pack == first.pack)


async def test_missing_things_are_none(data):
    s = (await all_stickers(data))[0]
    other = [p.name for p in await data.packs() if p.name != s.pack][0]
    assert await data.pack('no_such_pack') is None
    assert await data.sticker(other, s.id) is None
    assert await data.sticker(s.pack, 10 ** 8) is None


async def test_top_and_bottom_order(data):
    stickers = await all_stickers(data)
    best = sorted(stickers, key=lambda s: (s.rating, s.id), reverse=True)[:9]
    worst = sorted(stickers, key=lambda s: (s.rating, s.id))[:9]
    assert [s.id for s in await data.top_stickers(9)] == [
        s.id for s in best]
    assert [s.id for s in await data.bottom_stickers(9)] == [
        s.id for s in worst]
    assert best[0].rating > worst[0].rating


def moved(before, after):
    return (after.users - before.users, after.views - before.views,
            after.sessions - before.sessions)


async def test_session_counts_one_user_many_views(data):
    v, w = visit(), visit()
    before = await data.stats()
    await data.record_visits([v, v])
    middle = await data.stats()
    assert moved(before, middle) == (1, 2, 1)
    # One known, one new twice over, in one batch.
    await data.record_visits([w, v, w])
    assert moved(middle, await data.stats()) == (1, 3, 1)
    await data.record_visits([])
    assert moved(middle, await data.stats()) == (1, 3, 1)


async def test_only_recorded_visits_move_sessions_and_views(data):
    v = visit()
    before = await data.stats()
    await data.top_stickers(9)
    await data.bottom_stickers(9)
    await issue(data, v)
    after = await data.stats()
    assert moved(before, after) == (0, 0, 0)
    assert after.ballots == before.ballots + 2


async def test_a_batch_of_visits_is_one_transaction(data):
    """Many batches at once, with sessions in common: each counts whole,
    none waits for another forever."""
    shared = [visit() for _ in range(50)]
    batches = [shared[i:] + shared[:i] + [visit()] for i in range(0, 50, 5)]
    before = await data.stats()
    await asyncio.gather(*[data.record_visits(b) for b in batches])
    assert moved(before, await data.stats()) == (60, 510, 60)


async def test_pair_is_two_different_stickers(data):
    seen = set()
    for _ in range(20):
        _, (a, b) = await issue(data, visit())
        assert a.id != b.id
        assert a == await current(data, a)
        seen.update((a.id, b.id))
    assert len(seen) > 10


async def test_vote_counts_once(data):
    v = visit()
    (win, lose), (a, b) = await issue(data, v)
    before = await data.stats()
    assert await data.cast_vote(v.session, win, lose) == VoteOutcome.OK
    a2, b2 = await current(data, a), await current(data, b)
    assert (a2.rating, a2.votes_plus, a2.votes_minus) == (
        a.rating + 1, a.votes_plus + 1, a.votes_minus)
    assert (b2.rating, b2.votes_plus, b2.votes_minus) == (
        b.rating - 1, b.votes_plus, b.votes_minus + 1)
    after = await data.stats()
    assert after.votes == before.votes + 1
    assert after.ballots == before.ballots - 2
    # Replayed, in either order: nothing changes.
    assert await data.cast_vote(v.session, win, lose) == VoteOutcome.UNKNOWN
    assert await data.cast_vote(v.session, lose, win) == VoteOutcome.UNKNOWN
    assert await current(data, a) == a2
    assert (await data.stats()).votes == after.votes


async def test_loser_can_win_instead(data):
    v = visit()
    (win, lose), (a, b) = await issue(data, v)
    assert await data.cast_vote(v.session, lose, win) == VoteOutcome.OK
    assert (await current(data, b)).rating == b.rating + 1
    assert (await current(data, a)).rating == a.rating - 1


async def assert_refused(data, session, win, lose, outcome, pair):
    before = await data.stats()
    assert await data.cast_vote(session, win, lose) == outcome
    for s in pair:
        assert await current(data, s) == s
    after = await data.stats()
    assert (after.votes, after.ballots) == (before.votes, before.ballots)


async def test_forged_tokens_change_nothing(data):
    v = visit()
    (win, lose), pair = await issue(data, v)
    forged = secrets.token_urlsafe(16)
    await assert_refused(data, v.session, forged, lose, VoteOutcome.UNKNOWN, pair)
    await assert_refused(data, v.session, win, forged, VoteOutcome.UNKNOWN, pair)
    await assert_refused(data, v.session, win, win, VoteOutcome.UNKNOWN, pair)
    assert await data.cast_vote(v.session, win, lose) == VoteOutcome.OK


async def test_tokens_of_two_pairs_are_not_a_pair(data):
    v = visit()
    (win1, lose1), pair1 = await issue(data, v)
    (win2, lose2), pair2 = await issue(data, v)
    await assert_refused(data, v.session, win1, lose2, VoteOutcome.NOT_PAIR,
                         pair1 + pair2)
    assert await data.cast_vote(v.session, win1, lose1) == VoteOutcome.OK
    assert await data.cast_vote(v.session, win2, lose2) == VoteOutcome.OK


async def test_foreign_session_is_refused(data):
    owner, thief = visit(), visit()
    (win, lose), pair = await issue(data, owner)
    await assert_refused(data, thief.session, win, lose, VoteOutcome.FOREIGN, pair)
    assert await data.cast_vote(owner.session, win, lose) == VoteOutcome.OK


async def test_expired_ballot_is_refused(data):
    v = visit()
    (win, lose), pair = await issue(data, v, ttl=0.3)
    await asyncio.sleep(0.6)
    await assert_refused(data, v.session, win, lose, VoteOutcome.EXPIRED, pair)


async def test_concurrent_votes_count_exactly_once(data, new_data):
    v = visit()
    (win, lose), (a, b) = await issue(data, v)
    others = [new_data() for _ in range(4)]
    for d in others:
        await d.start()
    try:
        # Warm every connection up first, so the calls below really overlap.
        await asyncio.gather(*[d.cast_vote(v.session, lose, lose)
                               for d in [data] * 8 + others])
        outcomes = await asyncio.gather(*[
            d.cast_vote(v.session, win, lose) for d in [data] * 8 + others])
    finally:
        for d in others:
            await d.close()
    assert outcomes.count(VoteOutcome.OK) == 1
    assert set(outcomes) == {VoteOutcome.OK, VoteOutcome.UNKNOWN}
    assert (await current(data, a)).rating == a.rating + 1
    assert (await current(data, b)).rating == b.rating - 1


async def test_concurrent_votes_both_ways_count_once(data):
    """Either token may win: calls racing with the tokens swapped must not
    deadlock, and exactly one of them counts."""
    v = visit()
    (win, lose), (a, b) = await issue(data, v)
    await asyncio.gather(*[data.cast_vote(v.session, lose, lose)
                           for _ in range(8)])
    orders = [(win, lose), (lose, win)] * 4
    outcomes = await asyncio.gather(*[
        data.cast_vote(v.session, *order) for order in orders])
    assert sorted(outcomes) == ['ok'] + ['unknown'] * 7
    a_won = orders[outcomes.index(VoteOutcome.OK)][0] == win
    assert (await current(data, a)).rating == a.rating + (1 if a_won else -1)
    assert (await current(data, b)).rating == b.rating + (-1 if a_won else 1)


async def test_expire_removes_old_ballots_and_sessions(data, backend):
    v = visit()
    await data.record_visits([v])     # a session the last sweep finds old
    (win, lose), pair = await issue(data, v, ttl=0.2)
    await asyncio.sleep(0.5)
    ballots, _ = await sweep(backend, 3600, 10 ** 9, 10 ** 9)
    assert ballots >= 2
    await assert_refused(data, v.session, win, lose, VoteOutcome.UNKNOWN, pair)
    await asyncio.sleep(1.1)
    await data.record_visits([visit()])
    _, sessions = await sweep(backend, 1, 10 ** 9, 10 ** 9)
    assert sessions >= 1
    assert (await data.stats()).sessions >= 1   # the fresh one stays


async def test_expire_keeps_tables_under_their_caps(data, backend):
    for _ in range(5):
        await issue(data, visit())
    await sweep(backend, 3600, 2, 4)
    stats = await data.stats()
    assert stats.sessions <= 2
    assert stats.ballots <= 4


async def test_forget_visitors_removes_every_session_and_ballot(data,
                                                                backend):
    v = visit()
    (win, lose), pair = await issue(data, v)
    await data.record_visits([visit(), visit()])
    before = await data.stats()
    assert before.sessions >= 2 and before.ballots >= 2
    if database(data) != 'django_orm':   # its site's account is the owner
        with pytest.raises(DataUnavailable):    # the app's account may not
            await data.forget_visitors()
        assert (await data.stats()).sessions >= before.sessions
    admin = backend.admin()
    await admin.start()
    try:
        assert await admin.forget_visitors() == (before.ballots,
                                                 before.sessions)
    finally:
        await admin.close()
    after = await data.stats()
    assert (after.sessions, after.ballots) == (0, 0)
    assert (after.stickers, after.votes) == (before.stickers, before.votes)
    await assert_refused(data, v.session, win, lose, VoteOutcome.UNKNOWN, pair)


async def test_app_cannot_choose_what_the_sweep_removes(data):
    for _ in range(3):
        await issue(data, visit())
    before = await data.stats()
    if is_tarantool(data):
        # The instance sweeps by itself; the app may not even ask it to.
        assert data.sweeps_itself
        for name, args in [('expire', [0, 0, 0]), ('expire', []),
                           ('limits', [])]:
            with pytest.raises(DataUnavailable, match='denied'):
                await data._call(name, args)
    elif database(data) == 'redis':
        # The loader's functions need a key the app's account may not name.
        for name, args in [('expire_below', [0, 0, 0, 1000]),
                           ('set_limits', [0, 0, 0]), ('limits', [])]:
            with pytest.raises(DataUnavailable, match='no permissions'):
                await data._admin(name, args)
            with pytest.raises(DataUnavailable, match='bad argument'):
                await data._call(name, args)
        assert await data.expire() == (0, 0)
    elif database(data) == 'rediscluster':
        # The same, in every bucket.
        for name, args in [('expire_below', [0, 0, 0, 1000]),
                           ('set_limits', [0, 0, 0]), ('limits', [])]:
            with pytest.raises(DataUnavailable, match='no permissions'):
                await data._fcall(name, 'st:{b0}:admin', args)
            with pytest.raises(DataUnavailable, match='bad argument'):
                await data._fcall(name, 'st:{b0}:counters', args)
        assert await data.expire() == (0, 0)
    elif database(data) == 'orm':
        # The limits are the owner's; the app's account sweeps by them.
        from sqlalchemy import update
        from data_interface.orm.models import Limits
        async with data._sessions() as session:
            with pytest.raises(Exception, match='permission denied'):
                await session.execute(update(Limits).values(max_ballots=0))
    elif database(data) == 'django_orm':
        # The site's account owns its tables: expire() reads its limits
        # from the table, and nothing here is old or over a cap.
        assert await data.expire() == (0, 0)
    else:
        with pytest.raises(DataUnavailable, match='does not exist'):
            await data._query('fetchval', 'SELECT expire($1, $2, $3, $4)',
                              0.0, 0, 0, 1000)
        # Its limits are the database's: nothing here is old or over a cap.
        assert await data.expire() == (0, 0)
    after = await data.stats()
    assert (after.sessions, after.ballots) == (before.sessions, before.ballots)


SESSION = str(uuid.uuid4())
TOKEN, TOKEN2 = tokens()
SNOWMEN = '\u2603' * 22    # 22 characters, 66 bytes
# (function, arguments, refused by the database itself): every one of these
# is refused, and changes nothing. The others are refused by PostgreSQL's
# typed parameters before the function runs.
BAD_CALLS = [
    ('sticker_pair', ['not-a-uuid', TOKEN, TOKEN2, 60], True),
    ('sticker_pair', [SESSION + 'x', TOKEN, TOKEN2, 60], True),
    ('sticker_pair', [SESSION, 'short', TOKEN2, 60], True),
    ('sticker_pair', [SESSION, TOKEN, TOKEN, 60], True),
    ('sticker_pair', [SESSION, TOKEN, TOKEN2 + 'a', 60], True),
    ('sticker_pair', [SESSION, TOKEN, "'; DROP TABLE x; --'", 60], True),
    ('sticker_pair', [SESSION, TOKEN, TOKEN2, 0], True),
    ('sticker_pair', [SESSION, TOKEN, TOKEN2, 3601], True),
    ('sticker_pair', [SESSION, TOKEN, TOKEN2, float('nan')], True),
    ('sticker_pair', [SESSION, TOKEN, TOKEN2, float('inf')], True),
    ('sticker_pair', [42, TOKEN, TOKEN2, 60], False),
    ('sticker_pair', [None, TOKEN, TOKEN2, 60], True),
    ('sticker_pair', [SESSION, TOKEN, TOKEN2, 'x'], False),
    ('cast_vote', ['x' * 36, TOKEN, TOKEN], True),
    ('cast_vote', [SESSION, TOKEN * 2, TOKEN2], True),
    ('cast_vote', [SESSION, TOKEN, None], True),
    ('cast_vote', [SESSION, TOKEN, 7], False),
    ('top_stickers', [0], True),
    ('top_stickers', [101], True),
    ('bottom_stickers', [-1], True),
    ('bottom_stickers', ['x'], False),
    ('pack_stickers', ['a' * 65], True),
    ('pack_stickers', [None], True),
    ('get_sticker', ['a' * 65, 1], True),
    ('get_sticker', ['pack', -1], True),
    ('get_sticker', ['pack', 'x'], False),
]


@pytest.mark.parametrize('name, args, by_function', BAD_CALLS)
async def test_functions_refuse_bad_arguments(data, name, args, by_function):
    before = await data.stats()
    with pytest.raises(DataUnavailable) as e:
        await call(data, name, *args)
    if by_function or database(data) != 'postgres':
        assert 'bad argument' in str(e.value)
    after = await data.stats()
    assert after == before


BAD_VISITS = [
    ['not-a-uuid', '', ''],
    [SESSION + 'x', '', ''],
    [SESSION.upper(), '', ''],
    [SESSION, 'a' * 65, ''],
    [SESSION, SNOWMEN, ''],
    [SESSION, '', 'a' * 257],
    [SESSION, '', SNOWMEN * 4],
    [SESSION, None, ''],
    [None, '', ''],
]


@pytest.mark.parametrize('bad', BAD_VISITS)
async def test_a_bad_visit_refuses_its_whole_batch(data, bad):
    before = await data.stats()
    with pytest.raises(DataUnavailable, match='bad argument'):
        await record(data, [[str(uuid.uuid4()), 'ip', 'ua'], bad])
    assert await data.stats() == before


async def test_batches_of_visits_are_bounded(data):
    before = await data.stats()
    with pytest.raises(DataUnavailable, match='bad argument'):
        await record(data, [[str(uuid.uuid4()), '', '']] * 1001)
    assert await data.stats() == before
    assert await record(data, [[str(uuid.uuid4()), '', '']] * 1000) == 1000
    assert moved(before, await data.stats()) == (1, 1000, 1)


async def test_functions_take_arguments_at_their_limits(data):
    v = Visit(str(uuid.uuid4()), SNOWMEN[:21] + 'a', SNOWMEN * 3 + 'a' * 58)
    assert [len(x.encode('utf-8')) for x in v[1:]] == [64, 256]
    await data.record_visits([v])
    (win, lose), pair = await issue(data, v, ttl=3600)
    assert await data.cast_vote(v.session, win, lose) == VoteOutcome.OK
    assert len(await data.top_stickers(100)) == min(
        100, len(small_data_set().stickers))
    assert await data.pack('a' * 64) is None
    assert await data.sticker('a' * 64, 1) is None


async def test_hostile_text_is_stored_as_text(data):
    hostile = "'; DROP TABLE stickers; -- \" \\ \u2603 <script>"
    v = visit(ip=hostile, user_agent=hostile * 3)
    _, pair = await issue(data, v)
    assert len(pair) == 2
    await data.record_visits([v, visit(ip='\x00', user_agent='a\x00b')])
    assert await data.pack(hostile) is None
    assert await data.sticker(hostile, 1) is None
    # Pages clean NUL out of what they store, but not out of path parts.
    assert await data.pack('a\x00b') is None
    assert await data.sticker('a\x00b', 1) is None
    stats = await data.stats()
    assert stats.stickers == len(small_data_set().stickers)


async def test_load_is_idempotent_and_keeps_ratings(data, backend):
    s = (await all_stickers(data))[0]
    v = visit()
    (win, lose), (a, b) = await issue(data, v)
    await data.cast_vote(v.session, win, lose)
    rated = await current(data, a)
    admin = backend.admin()
    await admin.start()
    try:
        assert await admin.load(small_data_set()) == 0
    finally:
        await admin.close()
    assert await current(data, a) == rated
    assert (await data.stats()).stickers == len(await all_stickers(data))
    assert await current(data, s) is not None



async def own_database(data, backend, directory, memory=None,
                       **tarantool_env):
    """A fresh, empty database of the same kind as `data`, with the same
    driver and storage engine: (new DataInterface for the app, admin one,
    stop function); `memory`: Redis's maxmemory."""
    if is_tarantool(data):
        from conftest import tarantool_address
        from data_interface.address import as_admin
        server = start_tarantool(directory, TNT_ENGINE=backend.engine,
                                 **tarantool_env)
        address = tarantool_address(server)
        kind = type(data)
        return (lambda: kind(address, data.mode),
                lambda: kind(as_admin(address)), server.stop)
    if database(data) == 'redis':
        from data_interface.redis.redis_data import RedisData
        server = start_redis(directory, memory)
        configure_redis(server)
        return (lambda: RedisData(server.address, data.mode),
                lambda: RedisData(server.admin_address), server.stop)
    if database(data) == 'rediscluster':
        from conftest import configure_rediscluster, start_rediscluster
        from data_interface.rediscluster.cluster_data import ClusterData
        server = start_rediscluster(directory)
        configure_rediscluster(server)
        return (lambda: ClusterData(server.address, apply_every=0),
                lambda: ClusterData(server.admin_address), server.stop)
    if database(data) == 'django_orm':
        pytest.skip("Django's settings name one database per process")
    server = start_postgres()
    kind = type(data)    # the driver's
    return (lambda: kind(server.dsn), lambda: kind(server.owner_dsn),
            lambda: remove_postgres(server))


@pytest.mark.own_database
async def test_pairs_are_existing_stickers_when_ids_have_gaps(data, backend,
                                                             tmp_path):
    full = small_data_set()
    kept = [full.stickers[1], full.stickers[29], full.stickers[30]]
    assert [s.id for s in kept] == [2, 30, 31]
    new, admin, stop = await own_database(data, backend, str(tmp_path))
    try:
        empty = new()
        await empty.start()
        try:
            # A failure of the database, not of the visitor: 503, not 500.
            with pytest.raises(DataUnavailable, match='fewer than two'):
                await issue(empty, visit())
        finally:
            await empty.close()
        loader = admin()
        await loader.start()
        try:
            assert await loader.load(dataset.DataSet(full.packs, kept)) == 3
        finally:
            await loader.close()
        gapped = new()
        await gapped.start()
        try:
            seen = set()
            for _ in range(60):
                _, (a, b) = await issue(gapped, visit())
                assert a.id != b.id
                seen.update((a.id, b.id))
            assert seen == {2, 30, 31}
        finally:
            await gapped.close()
    finally:
        stop()


# Big enough to show the caps at work, small enough to fill in seconds.
SMALL_MEMTX = 32 * 1024 * 1024


@pytest.mark.own_database
# The caps are the instance's, sized from its memory (memtx's, Redis's): one
# driver of each, mode one, fills it fastest.
@pytest.mark.parametrize('backend', [b for b in ('tarantool-one', 'redis-one')
                                     if b in BACKENDS], indirect=True)
async def test_sessions_stop_at_a_cap_that_fits_memory(data, backend,
                                                       tmp_path):
    """Visits with the largest strings, well past the session and ballot
    caps of a small instance: every call succeeds and the tables stay
    within the caps, which the instance derived from its memory."""
    new, admin, stop = await own_database(
        data, backend, str(tmp_path), TNT_MEMTX_MEMORY=str(SMALL_MEMTX),
        memory=SMALL_MEMTX)
    try:
        loader = admin()
        await loader.start()
        try:
            await loader.load(small_data_set())
            if is_tarantool(loader):
                _, max_sessions, max_ballots = await loader._call('limits', [])
            else:
                _, max_sessions, max_ballots, _ = await loader._admin(
                    'limits', [])
        finally:
            await loader.close()
        assert 10000 < max_sessions < SMALL_MEMTX // 512
        full = new()
        await full.start()
        try:
            ip, agent = SNOWMEN[:21] + 'a', SNOWMEN * 3 + 'a' * 58
            for done in range(0, max_sessions + 1000, 500):
                visits = [Visit(str(uuid.uuid4()), ip, agent)
                          for _ in range(500)]
                await full.record_visits(visits)
                await asyncio.gather(*[full.sticker_pair(v.session, tokens(),
                                                         600) for v in visits])
            stats = await full.stats()
            assert stats.sessions == max_sessions
            assert stats.ballots == max_ballots
            assert len(await full.top_stickers(9)) == 9
            v = visit(ip, agent)
            (win, lose), _ = await issue(full, v)
            assert await full.cast_vote(v.session, win, lose) == VoteOutcome.OK
        finally:
            await full.close()
    finally:
        stop()
