"""A Tarantool that stops answering (stalled, not gone): a call that times
out is DataUnavailable (a 503), on every Python the drivers run on."""
import asyncio
import os
import signal

import pytest

from conftest import start_tarantool, tarantool_address
from data_interface import DataUnavailable

# Each test starts its own databases.
pytestmark = pytest.mark.db


@pytest.mark.legacy
async def test_a_stalled_call_is_unavailable(tmp_path):
    from data_interface.tarantool.asynctnt_data import AsynctntData
    db = start_tarantool(str(tmp_path / 'db'))
    try:
        data = AsynctntData(tarantool_address(db))
        data.request_timeout = 0.5
        await data.start()
        try:
            assert await data.top_stickers(9) == []
            os.kill(db.pid, signal.SIGSTOP)
            try:
                with pytest.raises(DataUnavailable):
                    await data.top_stickers(9)
            finally:
                os.kill(db.pid, signal.SIGCONT)
        finally:
            await data.close()
    finally:
        db.stop()


@pytest.mark.legacy
@pytest.mark.parametrize('mode', ['one', 'pool'])
async def test_a_stalled_redis_is_unavailable(tmp_path, mode):
    """Stopped under a call, and while a new connection logs in."""
    from conftest import configure_redis, start_redis
    from data_interface.redis.redis_data import RedisData
    db = start_redis(str(tmp_path / 'db'))
    try:
        configure_redis(db)
        data = RedisData(db.address, mode, timeout=0.5)
        await data.start()
        late = RedisData(db.address, mode, timeout=0.5)
        try:
            assert await data.top_stickers(9) == []
            os.kill(db.pid, signal.SIGSTOP)
            try:
                with pytest.raises(DataUnavailable):
                    await data.top_stickers(9)
                with pytest.raises(DataUnavailable):
                    await late.start()
            finally:
                os.kill(db.pid, signal.SIGCONT)
            assert await data.top_stickers(9) == []
        finally:
            await data.close()
    finally:
        db.stop()


def sockets():
    """The sockets this process holds open."""
    fds = os.listdir('/proc/self/fd')
    return sum(os.readlink('/proc/self/fd/' + fd).startswith('socket:')
               for fd in fds if os.path.exists('/proc/self/fd/' + fd))


@pytest.mark.legacy
@pytest.mark.parametrize('driver', [
    'asynctnt', pytest.param('aiotarantool', marks=pytest.mark.needs('aiotarantool'))])
async def test_a_connect_to_a_stalled_tarantool_is_unavailable_and_left_closed(
        tmp_path, driver, capfd):
    """Mode 'multi' connects for each call: one cut short by its timeout
    must leave no socket or reader behind (one would log the late answer)."""
    if driver == 'asynctnt':
        from data_interface.tarantool.asynctnt_data import AsynctntData as Data
    else:
        from data_interface.tarantool.aiotarantool_data import (
            AiotarantoolData as Data)
    db = start_tarantool(str(tmp_path / 'db'))
    try:
        data = Data(tarantool_address(db), 'multi')
        await data.start()
        assert await data.top_stickers(9) == []
        await asyncio.sleep(0.2)    # its connection closed
        before = sockets()
        os.kill(db.pid, signal.SIGSTOP)
        try:
            with pytest.raises(DataUnavailable):
                await data.top_stickers(9)
        finally:
            os.kill(db.pid, signal.SIGCONT)
        assert await data.top_stickers(9) == []
        await asyncio.sleep(0.2)    # time for a late answer to come
        assert sockets() == before
        await data.close()
    finally:
        db.stop()
    assert 'Logging error' not in capfd.readouterr().err
