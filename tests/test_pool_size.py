"""--workers N on PostgreSQL: the workers' pools and the parent's stay
within the connections the server takes."""
import pytest

from runtime.workers import given_databases, worker_pool_size

ENGINE = 'aiohttp-postgres-pool-uvloop'


@pytest.mark.parametrize('limit, workers, size, expected', [
    (197, 2, 16, 16),       # room for all: as one process
    (197, 16, 16, 11),      # 16 * 11 + 16 <= 197
    (100, 256, 16, 1),      # never below one
])
def test_worker_pool_size(limit, workers, size, expected):
    got = worker_pool_size(limit, workers, size)
    assert got == expected
    assert got * workers + size <= limit or got == 1


async def test_a_worker_takes_the_size_it_is_given(postgres):
    from runtime import engines
    engine = engines.BY_NAME[ENGINE]
    config = {'database': postgres.dsn, 'pool_size': 2}
    async with given_databases(engine, config) as data:
        assert (data.min_size, data.max_size) == (2, 2)
        assert await data.connection_limit() > 0
