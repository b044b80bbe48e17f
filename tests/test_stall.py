"""A Tarantool that stops answering (stalled, not gone): a call that times
out is DataUnavailable (a 503), on every Python the drivers run on."""
import os
import signal

import pytest

from conftest import start_tarantool, tarantool_address
from data_interface import DataUnavailable


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
