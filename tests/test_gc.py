"""Every serving process freezes its start-up objects (gc.freeze), so that
the collector's full passes walk only what requests made: checked from the
number each process logs once it listens (the workers' in
test_workers.py)."""
import re

import pytest

from conftest import wait_until
from plugins.servers import one_of_each
from runtime import serve

ENGINES = one_of_each(['aiohttp-tarantool-one-uvloop'])
FROZEN = re.compile(r'start-up objects frozen: (\d+); collector thresholds '
                    r'(\d+), (\d+), (\d+)')
# Far fewer than any site holds at start (its templates, routes, stickers'
# cards and the framework's own): a freeze before the start would fail it.
AT_LEAST = 20000


def frozen(output):
    """The counts of frozen objects the processes logged (each checked to
    have set the collector's thresholds)."""
    found = FROZEN.findall(output)
    assert all(tuple(map(int, f[1:])) == serve.THRESHOLDS for f in found), found
    return [int(f[0]) for f in found]


@pytest.mark.parametrize('engine', ENGINES)
def test_start_up_objects_are_frozen(shared_server, engine):
    server = shared_server(engine)
    wait_until(lambda: frozen(server.output()), 10, 0.05)
    [count] = frozen(server.output())
    assert count >= AT_LEAST
