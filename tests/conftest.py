"""Real databases and real servers for the tests: the session starts its own
Tarantool, PostgreSQL and Redis in temporary directories, loads a small
generated data set, and starts server.py processes on free ports.  What
each part provides is in plugins/: databases, backends (the contract
suite's), servers, waiting (polling), lanes (markers and their guard)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytest_plugins = ['plugins.databases', 'plugins.backends', 'plugins.servers',
                  'plugins.checkouts', 'plugins.lanes']
# Their asserts read as the tests' do, though imported below first.
pytest.register_assert_rewrite('plugins')

# Names the test modules import from here.
from runtime.processes import answers, free_port, terminate  # noqa: E402,F401
from runtime.settings import ROOT  # noqa: E402
from plugins.databases import (  # noqa: E402,F401
    TEST_PACKS, configure_redis, configure_rediscluster, load_small,
    load_small_dataset, own_loaded, remove_postgres, start_postgres,
    start_redis,
    start_rediscluster, start_tarantool,
    tarantool_address, small_data_set)
from plugins.servers import ServerProcess, engine_args, fetch  # noqa: E402,F401
from plugins.waiting import until, wait_until  # noqa: E402,F401

ARTIFACTS = os.path.join(ROOT, 'test-artifacts')

# Tests of what only the main environment has (3.8+: the benchmark's
# matplotlib, FastAPI, socketify).
collect_ignore = (['test_bench.py', 'test_ceilings.py', 'test_pythons.py',
                   'test_charts.py', 'test_figures.py', 'test_fastapi.py',
                   'test_socketify.py']
                  if sys.version_info < (3, 8) else [])


def pytest_collection_modifyitems(items):
    # Django has one configuration per process, and its ORM's (with its
    # databases) must be the first: the adapter's own tests, which need
    # none, run last, under whichever came.
    items.sort(key=lambda item: getattr(item, 'module', None) is not None
               and item.module.__name__ == 'test_django')
