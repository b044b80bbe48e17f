"""No acknowledged vote is lost: voters keep voting through a server.py
engine while its database is killed and started again, or stopped
(SIGSTOP) and let run again, and afterwards every vote answered 200 is
counted, and none twice."""
import asyncio
import os
import secrets
import signal
import uuid

import aiohttp
import pytest

from bench.pagecheck import ballots
from conftest import (ServerProcess, remove_postgres, start_postgres,
                      start_redis, start_tarantool, tarantool_address, until)
from runtime.processes import children
from test_edge import DjangoOutage, PostgresOutage

# Each test starts its own databases or server.py processes.
pytestmark = [pytest.mark.db, pytest.mark.server]

VOTERS = 8
VOTING = 1.5    # seconds of voting before the crash, and again after it


class Tally:
    """Answers to votes: 200 (counted), 409/400 (refused: not counted), and
    unknown outcome (503 or no answer: maybe counted)."""

    def __init__(self):
        self.ok = self.refused = self.unknown = 0


async def vote_until(url, tally, stop):
    jar = aiohttp.CookieJar(unsafe=True)    # keep the session cookie of an IP
    timeout = aiohttp.ClientTimeout(total=10)
    async with aiohttp.ClientSession(cookie_jar=jar, timeout=timeout) as s:
        pair = None
        while not stop.is_set():
            if pair is None:
                try:
                    async with s.get(url + '/') as r:
                        if r.status == 200:
                            pair = ballots(await r.text())
                        else:
                            assert r.status == 503, r.status
                except (aiohttp.ClientError, asyncio.TimeoutError):
                    pass
                if pair is None:
                    await asyncio.sleep(0.05)   # the database is down
                continue
            (_, win, lose), pair = pair[0], None
            try:
                async with s.post(url + '/', data={'win': win, 'lose': lose},
                                  allow_redirects=False) as r:
                    body = await r.text()
            except (aiohttp.ClientError, asyncio.TimeoutError):
                tally.unknown += 1
                continue
            if r.status == 200:
                tally.ok += 1
                # The next pair, unless drawing it failed (the vote stands).
                pair = ballots(body) if 'Vote counted</h1>' not in body \
                    else None
            elif r.status == 503:
                tally.unknown += 1
            else:   # a ballot issued before the crash and lost in it
                assert r.status == 409, (r.status, body)
                tally.refused += 1


async def counted(data):
    """(the server's vote counter, the sum of every sticker's votes_plus)."""
    await data.start()
    try:
        votes = (await data.stats()).votes
        plus = 0
        for p in await data.packs():
            plus += sum(s.votes_plus for s in (await data.pack(p.name)).stickers)
        return votes, plus
    finally:
        await data.close()


async def vote_through_a_crash(server, data, crash, restart, down=None):
    """Voters through crash() and restart(), `down` (a coroutine function:
    0.3 s by default) awaited between them. data: a DataInterface, or a
    coroutine function returning what counted() does."""
    count = data if callable(data) else lambda: counted(data)
    before = counted_before = await count()
    tally, stop = Tally(), asyncio.Event()
    voters = [asyncio.ensure_future(vote_until(server.url, tally, stop))
              for _ in range(VOTERS)]
    try:
        await asyncio.sleep(VOTING)
        await until(lambda: tally.ok > 0, 15, 0.1,
                    lambda: server.output()[-3000:])
        ok_before_crash = tally.ok
        await asyncio.get_event_loop().run_in_executor(None, crash)
        try:
            await (down() if down else asyncio.sleep(0.3))
        finally:
            await asyncio.get_event_loop().run_in_executor(None, restart)
        ok_at_restart = tally.ok
        await asyncio.sleep(VOTING)
        await until(lambda: tally.ok > ok_at_restart, 15, 0.1,
                    lambda: server.output()[-3000:])
    finally:
        stop.set()
        await asyncio.gather(*voters)
    after = await count()
    assert server.process.poll() is None, server.output()
    # No 500: the voters accept none. asyncpg's pool logs its reconnects with
    # a traceback, as warnings; an error of the site would be an ERROR.
    assert ' ERROR ' not in server.output(), server.output()
    assert ok_before_crash > 0 and tally.ok > ok_at_restart, (
        vars(tally), server.output()[-3000:])
    for old, new in zip(counted_before, after):
        assert tally.ok <= new - old <= tally.ok + tally.unknown, (
            before, after, vars(tally))


@pytest.mark.parametrize('engine', ['memtx', 'vinyl'])
async def test_tarantool_killed_loses_no_acknowledged_vote(tmp_path, engine):
    from data_interface.tarantool.asynctnt_data import AsynctntData
    db = start_tarantool(str(tmp_path / 'db'), TNT_ENGINE=engine)
    server = None
    try:
        server = ServerProcess(
            'aiohttp-tarantool-one',
            ['--tarantool', '%s:%d' % (db.host, db.port)],
            str(tmp_path / 'server.log'))
        await vote_through_a_crash(
            server, AsynctntData(tarantool_address(db)), db.kill, db.start)
    finally:
        if server is not None:
            server.stop()
        db.stop()


async def test_postgres_stopped_abruptly_loses_no_acknowledged_vote(tmp_path):
    """The cluster runs with synchronous_commit off; votes alone wait for
    the WAL flush, which is what this checks."""
    from data_interface.postgres.asyncpg_data import PostgresData
    db = start_postgres()
    server = None
    try:
        server = ServerProcess('aiohttp-postgres-pool', ['--postgres', db.owner_dsn],
                               str(tmp_path / 'server.log'))
        await vote_through_a_crash(
            server, PostgresData(db.dsn, min_size=1),
            lambda: db.stop(mode='immediate'), db.start)
    finally:
        if server is not None:
            server.stop()
        remove_postgres(db)


async def test_postgres_vote_alone_commits_with_synchronous_commit_on(postgres):
    """What makes the test above hold, whenever the crash comes: the vote's
    transaction waits for the WAL flush; a refused vote, a pair, a session
    do not (the cluster's synchronous_commit = off)."""
    import asyncpg
    conn = await asyncpg.connect(postgres.dsn)
    setting = "SELECT current_setting('synchronous_commit')"
    session = str(uuid.uuid4())
    win, lose = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    try:
        assert await conn.fetchval(setting) == 'off'
        async with conn.transaction():
            await conn.fetch(
                'SELECT * FROM sticker_pair($1, $2, $3, $4)',
                session, win, lose, 60.0)
            assert await conn.fetchval(
                'SELECT cast_vote($1, $2, $3)', session, win, win) == 'unknown'
            assert await conn.fetchval(setting) == 'off'
            assert await conn.fetchval(
                'SELECT cast_vote($1, $2, $3)', session, win, lose) == 'ok'
            assert await conn.fetchval(setting) == 'on'
        assert await conn.fetchval(setting) == 'off'
    finally:
        await conn.close()


async def test_postgres_load_commits_with_synchronous_commit_on(postgres):
    """A loaded batch is flushed before the call returns: the primary's
    position (its flushed WAL), which a replica must reach before it serves
    reads, then covers the data set."""
    import asyncpg
    conn = await asyncpg.connect(postgres.owner_dsn)
    setting = "SELECT current_setting('synchronous_commit')"
    try:
        async with conn.transaction():
            assert await conn.fetchval(setting) == 'off'
            assert await conn.fetchval(
                "SELECT load_stickers('[]', '[]')") == 0
            assert await conn.fetchval(setting) == 'on'
        assert await conn.fetchval(setting) == 'off'
    finally:
        await conn.close()


async def test_redis_killed_loses_no_acknowledged_vote(tmp_path):
    """appendfsync always: a vote is answered once it is in the
    append-only file, so SIGKILL loses none."""
    from data_interface.redis.redis_data import RedisData
    db = start_redis(str(tmp_path / 'db'))
    server = None
    try:
        a = db.address
        server = ServerProcess(
            'aiohttp-redis-one',
            ['--redis', 'redis://%s:%s@%s:%d/0' % (a.user, a.password,
                                                   a.host, a.port)],
            str(tmp_path / 'server.log'))
        await vote_through_a_crash(server, RedisData(a), db.kill, db.start)
    finally:
        if server is not None:
            server.stop()
        db.stop()


# Seconds PostgreSQL stays stopped (past every driver's timeout, 3 s), and
# within which each page asked meanwhile is answered.
FROZEN = 6
ANSWERED = 5


async def orm_counted(dsn):
    """counted() of the Django ORM backend's tables."""
    import asyncpg
    conn = await asyncpg.connect(dsn)
    try:
        return tuple(await conn.fetchrow(
            'SELECT (SELECT sum(votes) FROM orm_counters)::bigint,'
            ' (SELECT sum(votes_plus) FROM orm_stickers)::bigint'))
    finally:
        await conn.close()


async def each_answered_503_in_time(url):
    """/good asked again and again for FROZEN seconds, each a 503 within
    ANSWERED seconds."""
    loop = asyncio.get_running_loop()
    end = loop.time() + FROZEN
    timeout = aiohttp.ClientTimeout(total=ANSWERED)
    asked = 0
    async with aiohttp.ClientSession(timeout=timeout) as s:
        while loop.time() < end:
            try:
                async with s.get(url + '/good') as r:
                    await r.read()
            except asyncio.TimeoutError:
                pytest.fail('no answer within %d s after %d asked'
                            % (ANSWERED, asked))
            assert r.status == 503
            asked += 1
            await asyncio.sleep(0.2)


@pytest.mark.parametrize('engine', [
    'aiohttp-postgres-pool', 'aiohttp-django-pool-uvloop',
    'django-django-pool-uvloop'])
async def test_postgres_stopped_answers_503_in_time_and_loses_no_vote(
        tmp_path, engine):
    """Every process of PostgreSQL stopped (SIGSTOP: its connections
    silent, not closed) under voters, for longer than the driver's timeout:
    each page asked meanwhile is a 503 in time, pages are served again once
    it runs again (nothing of the server stays stuck), and every vote
    answered 200 counts once."""
    outage = (DjangoOutage if '-django-' in engine else
              PostgresOutage)(tmp_path)
    db, server, family = outage.db, None, []

    def stop():
        family[:] = [db.postmaster()] + children(db.postmaster())
        for pid in family:
            os.kill(pid, signal.SIGSTOP)

    def cont():
        for pid in family:
            os.kill(pid, signal.SIGCONT)

    async def count():
        if '-django-' in engine:
            return await orm_counted(db.owner_dsn)
        from data_interface.postgres.asyncpg_data import PostgresData
        return await counted(PostgresData(db.dsn, min_size=1))

    async def served():
        async with aiohttp.ClientSession() as s:
            async with s.get(server.url + '/good') as r:
                return r.status == 200

    async def down():
        await each_answered_503_in_time(server.url)
    try:
        server = ServerProcess(engine, await outage.load(),
                               str(tmp_path / 'server.log'))
        await vote_through_a_crash(server, count, stop, cont, down)
        await until(served, 10, 0.2, server.output)
        stopped, server = server, None
        assert stopped.stop() == 0, stopped.output()
    finally:
        if server is not None:
            server.stop()
        outage.remove()
