"""results.md's "What the ORM costs": each ORM engine beside the engine on
the raw driver its ORM runs over, from the run's capacities and demand."""
import pytest

from bench import orm_price

SLO = {'percentile': 'p99', 'ms': 10.0}


def capacity(target, page, rate, run=1):
    return {'target': target, 'page': page, 'rate': rate, 'open': False,
            'missed_at': rate * 1.2, 'saturation': rate * 1.5, 'slo': SLO,
            'run': run}


def demand(target, page, server, spread):
    at = {'server_us': server, 'serial_us': 0.0, 'spread_us': spread,
          'replicas_us': 0.0}
    return {'target': target, 'page': page, 'at_capacity': at}


def run(target, page, rps):
    return {'target': target, 'page': page, 'mode': 'plain', 'run': 1, 'exit_code': 0,
            'wrk': {'requests_per_sec': rps, 'latency_ms': {}, 'requests': 1000,
                    'socket_errors': {}, 'non2xx': 0}}


def results():
    orm, raw = 'fastapi-sqlalchemy-pool-uvloop', 'fastapi-postgres-pool-uvloop'
    return {'settings': {'latency': {'slo': SLO}},
            'capacity': [capacity(orm, 'good', 600.0), capacity(orm, 'good', 700.0, 2),
                         capacity(raw, 'good', 1600.0), capacity(orm, 'mix', 0.0),
                         capacity(raw, 'mix', 1000.0),
                         # no raw engine of its own in the run: not priced
                         capacity('aiohttp-sqlalchemy-pool-uvloop', 'mix', 500.0),
                         capacity('aiohttp-tarantool-one-uvloop', 'mix', 3000.0)],
            'demand': [demand(orm, 'good', 900.0, 300.0), demand(raw, 'good', 380.0, 220.0),
                       demand(orm, 'mix', 1500.0, 500.0), demand(raw, 'mix', 420.0, 180.0)],
            'runs': [run(orm, 'good', 400.0), run(orm, 'good', 440.0), run(orm, 'good', 420.0),
                     run(raw, 'good', 1250.0)],
            'saturation': [{'target': orm, 'oha': {'achieved': 150.0}},
                           {'target': raw, 'oha': {'achieved': 600.0}}]}


def test_each_orm_engine_is_priced_against_its_raw_driver():
    assert orm_price.raw_of('fastapi-sqlalchemy-pool-uvloop') == 'fastapi-postgres-pool-uvloop'
    assert orm_price.raw_of('aiohttp-sqlalchemy-pool') == 'aiohttp-postgres-pool'
    # Django's ORM runs over psycopg 3
    assert orm_price.raw_of('django-django-pool-uvloop') == 'django-psycopg-pool-uvloop'
    assert orm_price.raw_of('fastapi-postgres-pool-uvloop') is None
    assert orm_price.raw_of('no-such-engine') is None
    found = orm_price.rows(results())
    assert [(r['orm'], r['page']) for r in found] == [
        ('fastapi-sqlalchemy-pool-uvloop', 'good'), ('fastapi-sqlalchemy-pool-uvloop', 'mix')]
    good, mix = found
    assert good['capacity'] == (650.0, 1600.0)      # the median of two searches
    assert good['closed'] == (420.0, 1250.0) and mix['closed'] == (150.0, 600.0)
    assert good['cpu'] == (1200.0, 600.0) and mix['cpu'] == (2000.0, 600.0)
    # the mix's ORM kept no rate: below the one its search missed at
    assert mix['capacity'] == (0.0, 1000.0) and mix['below'] == (None, None)


def test_results_md_says_what_the_orm_costs():
    lines = orm_price.section(results())
    text = '\n'.join(lines)
    assert '## What the ORM costs' in text
    assert ('| fastapi-sqlalchemy-pool-uvloop | fastapi-postgres-pool-uvloop | good '
            '| 420 | 1,250 | 66 % | 650 | 1,600 | 59 % | 1,200 | 600 | 2.00× |') in lines
    assert ('| fastapi-sqlalchemy-pool-uvloop | fastapi-postgres-pool-uvloop | mix '
            '| 150 | 600 | 75 % | 0 | 1,000 | 100 % | 2,000 | 600 | 3.33× |') in lines
    assert ("On PostgreSQL, SQLAlchemy's ORM costs fastapi (fastapi-sqlalchemy-pool-uvloop) "
            '66 % on /good, 75 % on the mix of its closed-loop rate; 59 % on /good, '
            '100 % on the mix of its capacity within p99 ≤ 10 ms.') in lines
    assert orm_price.section({'capacity': [], 'demand': []}) == []


@pytest.mark.parametrize('orm, raw, lost', [(650.0, 1600.0, 59.375), (0.0, 100.0, 100.0),
                                            (100.0, 0.0, None), (None, 5.0, None)])
def test_the_share_lost(orm, raw, lost):
    """An ORM engine that kept no rate lost it all; no raw figure, no share."""
    got = orm_price.share(orm, raw)
    assert got is None if lost is None else got == pytest.approx(lost)


def test_an_orm_engine_that_kept_no_rate_has_lost_at_least_the_rest():
    r = results()
    missed = capacity('fastapi-sqlalchemy-pool-uvloop', 'mix', 0.0)
    missed['missed_at'] = 120.0
    r['capacity'][3] = missed
    line = [x for x in orm_price.section(r) if '| mix |' in x][0]
    assert '| < 120 | 1,000 | ≥ 88 % |' in line
