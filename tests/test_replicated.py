"""data_interface.replicated against a real Tarantool primary and real
read-only replicas: where reads and writes go, how fast a write shows on a
replica, and a replica that stalls, lags or dies leaving the read set and
coming back."""
import asyncio
import logging
import os
import signal
import time
import uuid

import pytest

from conftest import (free_port, load_small_dataset, start_tarantool,
                      tarantool_address, until)
from data_interface import DataUnavailable, Visit, cancel
from data_interface.address import as_admin
from data_interface import replicated as replicated_module
from data_interface.replicated import CHECK_EVERY, START_TIMEOUT, Replicated
from data_interface.tarantool.asynctnt_data import AsynctntData
from runtime.databases.tarantool import ManagedReplica
from test_site import Relay

# Each test starts what it needs itself.
pytestmark = pytest.mark.db

LAG = 0.5   # the bound these tests set


READS = ('top_stickers', 'bottom_stickers', 'stats', 'packs', 'pack',
         'sticker')


class Counted:
    """A data interface that counts the calls it serves: reads, and reads
    and writes together."""

    def __init__(self, data):
        self.data, self.calls, self.reads = data, 0, 0

    def __getattr__(self, name):
        method = getattr(self.data, name)
        if name in READS + ('record_visits', 'sticker_pair', 'cast_vote'):
            self.calls += 1
            self.reads += name in READS
        return method


@pytest.fixture(params=['memtx', 'vinyl'])
def cluster(tmp_path, request):
    """A loaded primary on the engine asked for, and two replicas."""
    primary = start_tarantool(str(tmp_path / 'primary'),
                              TNT_ENGINE=request.param,
                              TNT_SWEEP_EVERY='3600')
    replicas = []
    try:
        load_small_dataset(AsynctntData(as_admin(tarantool_address(primary))))
        for index in (1, 2):
            replicas.append(ManagedReplica(primary, index))
            replicas[-1].start()
        yield primary, replicas
    finally:
        for server in replicas + [primary]:
            server.stop()


def replicated(primary, replicas):
    return Replicated(AsynctntData(tarantool_address(primary)),
                      [Counted(AsynctntData(r.address)) for r in replicas],
                      max_lag=LAG)


async def seconds_until(condition, timeout):
    """Seconds until condition() (a coroutine function) is true."""
    started = time.monotonic()
    await until(condition, timeout, 0.005, 'timed out')
    return time.monotonic() - started


async def test_writes_go_to_the_primary_and_show_on_replicas_in_time(cluster):
    primary, replicas = cluster
    data = replicated(primary, replicas)
    data.primary = Counted(data.primary)
    await data.start()
    try:
        assert len(data.reading) == 2
        before = await data.stats()
        assert sum(r.data.calls for r in data.replicas) == 1
        session = str(uuid.uuid4())
        await data.record_visits([Visit(session, '127.0.0.1', 'test')])
        pair = await data.sticker_pair(session, ['a' * 22, 'b' * 22], 60)
        assert await data.cast_vote(session, 'a' * 22, 'b' * 22) == 'ok'
        # All three on the primary, not one on a replica, which could not
        # take it.
        assert (data.primary.calls, data.primary.reads) == (3, 0)
        assert sum(r.data.calls for r in data.replicas) == 1

        # Reads take the replicas in turn: the stats from one, the sticker
        # from the other, each within the bound.
        async def counted():
            s = await data.stats()
            winner = await data.sticker(pair[0].pack, pair[0].id)
            return (s.votes, s.sessions, s.users, winner.votes_plus) == (
                before.votes + 1, before.sessions + 1, before.users + 1,
                pair[0].votes_plus + 1)
        assert await seconds_until(counted, LAG) < LAG
        # The reads went to both replicas in turn, none to the primary.
        calls = [r.data.calls for r in data.replicas]
        assert min(calls) >= 1 and sum(calls) >= 3, calls
        assert data.primary.reads == 0
    finally:
        await data.close()


async def test_a_stalled_replica_leaves_and_comes_back(cluster):
    primary, replicas = cluster
    data = replicated(primary, replicas)
    await data.start()
    stalled = replicas[0]
    try:
        os.kill(stalled.pid, signal.SIGSTOP)
        try:
            left = await seconds_until(lambda: out(data, 0),
                                       2 * LAG + 2 * CHECK_EVERY)
            # Reads meanwhile: answered, by the other replica.
            for _ in range(20):
                assert len(await data.top_stickers(9)) == 9
        finally:
            os.kill(stalled.pid, signal.SIGCONT)
        back = await seconds_until(lambda: back_in(data, 0), 2)
        assert left < 2 * LAG + 2 * CHECK_EVERY and back < 2
        assert data.replicas[0].why_out is None
    finally:
        await data.close()


async def out(data, index):
    return data.replicas[index] not in data.reading


async def back_in(data, index):
    return data.replicas[index] in data.reading


async def test_a_killed_replica_costs_no_read_and_rejoins(cluster):
    primary, replicas = cluster
    data = replicated(primary, replicas)
    await data.start()
    try:
        for replica in replicas:
            replica.kill()
        # The next reads find both gone and fall back to the primary.
        for _ in range(10):
            assert len(await data.bottom_stickers(9)) == 9
        assert data.reading == []
        for replica in replicas:
            replica.restart()
        await seconds_until(lambda: back_in(data, 1), 5)
        await seconds_until(lambda: back_in(data, 0), 5)
    finally:
        await data.close()


async def test_a_replica_out_after_a_failure_must_answer_twice(cluster):
    """One answer does not bring it back: a PostgreSQL backend may answer a
    check after its postmaster was killed, and the next read then fails."""
    primary, replicas = cluster
    data = replicated(primary, replicas)
    await data.start()
    await cancel(data._checker)     # the test does the checks
    data._checker = None
    replica = data.replicas[0]
    try:
        replicas[0].kill()
        for _ in range(10):
            assert len(await data.bottom_stickers(9)) == 9
        assert replica not in data.reading
        assert replica.why_out.startswith('a read failed')
        replicas[0].restart()
        deadline = time.monotonic() + 10
        while replica.answered < 1:
            assert time.monotonic() < deadline, replica.why_out
            await asyncio.sleep(CHECK_EVERY)
            await data.check()
        assert replica not in data.reading, 'back after one answer'
        await data.check()
        assert replica in data.reading and replica.why_out is None
    finally:
        await data.close()


async def test_with_the_primary_dead_reads_go_on_and_writes_fail(cluster):
    primary, replicas = cluster
    data = replicated(primary, replicas)
    await data.start()
    try:
        session = str(uuid.uuid4())
        await data.sticker_pair(session, ['c' * 22, 'd' * 22], 60)
        assert await data.cast_vote(session, 'c' * 22, 'd' * 22) == 'ok'
        votes = (await primary_stats(primary)).votes

        async def replicated_vote():
            return (await data.stats()).votes == votes
        await seconds_until(replicated_vote, LAG)
        primary.kill()
        await asyncio.sleep(3 * LAG)    # replicas judged with no primary
        assert len(data.reading) == 2
        assert (await data.stats()).votes == votes
        with pytest.raises(DataUnavailable):
            await data.sticker_pair(session, ['e' * 22, 'f' * 22], 60)
        primary.restart()
        await seconds_until(lambda: primary_answers(data), 10)
        assert (await primary_stats(primary)).votes == votes
    finally:
        await data.close()


async def primary_stats(primary):
    data = AsynctntData(tarantool_address(primary))
    await data.start()
    try:
        return await data.stats()
    finally:
        await data.close()


async def primary_answers(data):
    try:
        await data.position()
        return True
    except DataUnavailable:
        return False


def test_a_replica_lags_by_the_oldest_position_it_has_not_reached():
    data = Replicated(None, [], max_lag=1.0)
    now = time.monotonic()
    data._positions.extend([(now - 3, 10), (now - 2, 20), (now - 1, 30)])
    assert data._lag(30) == 0
    assert data._lag(35) == 0
    assert 0.9 < data._lag(25) < 1.1
    assert 0.9 < data._lag(20) < 1.1   # 20 reached, 30 not
    assert 1.9 < data._lag(15) < 2.1
    assert 2.9 < data._lag(5) < 3.1


async def test_a_replica_down_at_start_joins_once_it_is_up(tmp_path,
                                                           monkeypatch):
    """A replica that cannot be reached at start: the start ends soon, the
    primary serves the reads, and the replica serves them once it is up."""
    monkeypatch.setattr(replicated_module, 'RETRY_FIRST', 0.2)
    primary = start_tarantool(str(tmp_path / 'primary'),
                              TNT_SWEEP_EVERY='3600')
    replica = ManagedReplica(primary, 1)    # its address; not started yet
    replica.port = free_port()   # primary's + 10 may be another test's
    data = replicated(primary, [replica])
    try:
        load_small_dataset(AsynctntData(as_admin(tarantool_address(primary))))
        await asyncio.wait_for(data.start(), START_TIMEOUT)
        assert data.reading == []
        assert 'cannot connect' in data.replicas[0].why_out
        assert len(await data.top_stickers(9)) == 9     # from the primary
        assert data.replicas[0].data.calls == 0
        await asyncio.get_event_loop().run_in_executor(None, replica.start)
        await until(lambda: back_in(data, 0), 10)
        assert len(await data.top_stickers(9)) == 9
        assert data.replicas[0].data.calls == 1
    finally:
        await data.close()
        replica.stop()
        primary.stop()


@pytest.fixture
def lagging(tmp_path):
    """A loaded primary, a relay to it and a replica that follows it
    through the relay (cut it, and the replica answers but lags)."""
    primary = start_tarantool(str(tmp_path / 'primary'),
                              TNT_SWEEP_EVERY='3600')
    replica = ManagedReplica(primary, 1)
    try:
        load_small_dataset(AsynctntData(as_admin(tarantool_address(primary))))
        yield primary, replica
    finally:
        os.kill(primary.pid, signal.SIGCONT)
        replica.stop()
        primary.stop()


async def test_a_slow_primary_lets_no_lagging_replica_in(lagging):
    """A primary that answers no check for less than down_after is slow: a
    replica that lags stays out. For longer it is down: the replica is in."""
    primary, replica = lagging
    relay = Relay(primary.port)
    await relay.open()
    replica.env['TNT_REPLICA_OF'] = '127.0.0.1:%d' % relay.port
    await asyncio.get_event_loop().run_in_executor(None, replica.start)
    data = replicated(primary, [replica])
    assert data.down_after == 3 * LAG
    await data.start()
    try:
        assert len(data.reading) == 1
        await relay.cut()
        await data.record_visits([Visit(str(uuid.uuid4()), '127.0.0.1', 't')])
        await until(lambda: out(data, 0), 2 * LAG + 2 * CHECK_EVERY)
        # Stopped for half the bound: slow, and the replica stays out.
        os.kill(primary.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        while time.monotonic() - stopped < data.down_after / 2:
            assert await out(data, 0)
            await asyncio.sleep(0.01)
        os.kill(primary.pid, signal.SIGCONT)
        await asyncio.sleep(2 * LAG)
        assert await out(data, 0) and not data._primary_down
        # Stopped for longer: down, and the replica serves the reads from
        # that check on (it kept answering while it lagged).
        await cancel(data._checker)     # the test does the checks
        data._checker = None
        os.kill(primary.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        said = []    # (message, replicas reading then): the line says "in"
        handler = logging.Handler()
        handler.emit = lambda r: said.append((r.getMessage(),
                                              len(data.reading)))
        logging.getLogger('replicas').addHandler(handler)
        try:
            while not data._primary_down:
                assert await out(data, 0)
                assert time.monotonic() - stopped < data.down_after + 2
                await asyncio.sleep(CHECK_EVERY)
                await data.check()
        finally:
            logging.getLogger('replicas').removeHandler(handler)
        assert [n for m, n in said if 'does not answer (' in m] == [1], said
        assert 'does not answer ()' not in said[-1][0]    # says why
        assert time.monotonic() - stopped >= data.down_after - LAG - CHECK_EVERY
        assert await back_in(data, 0)
        assert len(await data.top_stickers(9)) == 9
        assert data.replicas[0].data.calls == 1
        os.kill(primary.pid, signal.SIGCONT)
        data._checker = asyncio.ensure_future(data._check_forever())
        await until(lambda: out(data, 0), 2 * LAG + 2 * CHECK_EVERY)
    finally:
        os.kill(primary.pid, signal.SIGCONT)
        await data.close()


class Held:
    """A primary whose position() waits for the test once `hold` is set."""

    def __init__(self, data):
        self.data, self.hold = data, False
        self.asked, self.answer = asyncio.Event(), None

    def __getattr__(self, name):
        return getattr(self.data, name)

    async def position(self):
        if not self.hold:
            return await self.data.position()
        self.answer = asyncio.get_event_loop().create_future()
        self.asked.set()
        return await self.answer


async def test_close_ends_a_check_answered_as_it_is_cancelled(tarantool):
    """Up to Python 3.11, asyncio.wait_for returns an answer that comes in
    the turn its task is cancelled: the checker went on checking, and
    close() waited for it for ever."""
    primary = Held(AsynctntData(tarantool_address(tarantool)))
    data = Replicated(primary, [], max_lag=LAG)
    await data.start()
    try:
        position = await primary.data.position()
        primary.hold = True
        await asyncio.wait_for(primary.asked.wait(), 10 * CHECK_EVERY)
        primary.answer.set_result(position)
        closing = asyncio.ensure_future(data.close())   # cancels in this turn
        await asyncio.wait((closing,), timeout=5)
        assert closing.done(), 'close() still waits for the checker'
        closing.result()
        assert data._checker is None
    finally:
        primary.hold = False
        await data.close()


async def test_cancel_ends_a_task_that_goes_on_after_a_cancel():
    turns = []

    async def stubborn():
        while True:
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                turns.append('cancelled')
                if len(turns) == 3:
                    raise
    task = asyncio.ensure_future(stubborn())
    await asyncio.sleep(0.02)
    await asyncio.wait_for(cancel(task), 5)
    assert task.cancelled() and turns == ['cancelled'] * 3

    async def failing():
        raise ValueError('its own error')
    task = asyncio.ensure_future(failing())
    await asyncio.sleep(0)
    with pytest.raises(ValueError, match='its own error'):
        await cancel(task)
