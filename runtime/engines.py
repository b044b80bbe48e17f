"""Every engine of the benchmark, built from its dimensions.

An engine is framework x database driver and connection mode x event loop,
named FRAMEWORK-DRIVER-MODE[-uvloop], e.g. sanic-tarantool-one-uvloop.
"""
import difflib
import glob
import importlib.util
import json
import os
import sys
from collections import namedtuple

Engine = namedtuple('Engine', 'name framework driver mode loop')

FRAMEWORKS = ('aiohttp', 'sanic', 'japronto', 'uvicorn', 'granian', 'fastapi',
              'socketify')
# driver name -> (database, connection modes)
DRIVERS = (
    ('tarantool', 'tarantool', ('one', 'multi')),
    ('aiotarantool', 'tarantool', ('one', 'multi')),
    ('postgres', 'postgres', ('pool',)),
    ('redis', 'redis', ('one', 'pool')),
)
# aiotarantool installs only on CPython <= 3.8, the current stacks only on
# newer ones: they never meet in one interpreter.
LEGACY_DRIVERS = ('aiotarantool',)
CURRENT_ONLY = ('uvicorn', 'granian', 'fastapi', 'socketify')
LOOPS = ('asyncio', 'uvloop')

# What each dimension needs importable in this interpreter.
MODULES = {
    'aiohttp': 'aiohttp', 'sanic': 'sanic', 'japronto': 'japronto',
    'uvicorn': 'uvicorn', 'granian': 'granian', 'fastapi': 'fastapi',
    'socketify': 'socketify',
    'uvloop': 'uvloop', 'tarantool': 'asynctnt', 'aiotarantool': 'aiotarantool',
    'postgres': 'asyncpg', 'redis': 'redis',
}
# Modules that only install on CPython 3.7: they live in the legacy
# environment, which server.py switches to by itself.
LEGACY_MODULES = ('japronto', 'aiotarantool')
LEGACY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      '.venv37')
LEGACY_HOWTO = ('needs CPython 3.7: install it (pyenv install 3.7.16) '
                'and run ./run.sh setup')


def _build():
    engines = []
    for framework in FRAMEWORKS:
        for driver, _, modes in DRIVERS:
            if framework in CURRENT_ONLY and driver in LEGACY_DRIVERS:
                continue
            for mode in modes:
                for loop in LOOPS:
                    name = '-'.join([framework, driver, mode]
                                    + (['uvloop'] if loop == 'uvloop' else []))
                    engines.append(Engine(name, framework, driver, mode, loop))
    return tuple(engines)


ENGINES = _build()
BY_NAME = {e.name: e for e in ENGINES}


def database(engine):
    return {d: db for d, db, _ in DRIVERS}[engine.driver]


def _modules(engine):
    parts = (engine.framework, engine.driver, engine.loop)
    return [MODULES[part] for part in parts if part in MODULES]


def not_built():
    """{package: pip's reason} of this environment's pins that have no
    build for its interpreter (bench/pythons.py notes them)."""
    try:
        with open(os.path.join(sys.prefix, 'missing.json')) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def unavailable(engine):
    """Why the engine cannot run in this interpreter, or None if it can."""
    version = '%d.%d' % sys.version_info[:2]
    for module in _modules(engine):
        if importlib.util.find_spec(module) is None:
            if module in LEGACY_MODULES and version != '3.7':
                return '%s %s' % (module, LEGACY_HOWTO)
            why = not_built().get(module)
            if why:
                return '%s has no build for Python %s: %s' % (module, version, why)
            return '%s is not installed for Python %s' % (module, version)
    return None


def legacy_python(engine):
    """The legacy environment's interpreter if the engine cannot run in this
    one but can in that one (judged by its installed packages), else None."""
    python = os.path.join(LEGACY, 'bin', 'python')
    if (os.path.realpath(sys.prefix) == os.path.realpath(LEGACY)
            or not os.access(python, os.X_OK) or unavailable(engine) is None):
        return None
    sites = os.path.join(LEGACY, 'lib', 'python3.*', 'site-packages')
    for site in glob.glob(sites):
        if all(any(glob.glob(os.path.join(site, module + suffix))
                   for suffix in ('', '.py', '.*.so'))
               for module in _modules(engine)):
            return python
    return None


def runs_here(engine):
    """'yes', 'via .venv37 (Python 3.7)' or 'no: ' and why."""
    why = unavailable(engine)
    if why is None:
        return 'yes'
    if legacy_python(engine):
        return 'via .venv37 (Python 3.7)'
    return 'no: ' + why


def new_loop(loop):
    """A new event loop of the LOOPS dimension: 'asyncio' or 'uvloop'."""
    if loop == 'uvloop':
        import uvloop
        return uvloop.new_event_loop()
    import asyncio
    return asyncio.new_event_loop()


def tarantool_driver(driver):
    """The DataInterface class of a Tarantool driver of DRIVERS."""
    if driver == 'aiotarantool':
        from data_interface.tarantool.aiotarantool_data import AiotarantoolData
        return AiotarantoolData
    from data_interface.tarantool.asynctnt_data import AsynctntData
    return AsynctntData


def data_for(engine, tarantool=None, postgres=None, redis=None,
             replica=False):
    """An unstarted DataInterface of the engine's driver and mode at the
    Tarantool address, PostgreSQL DSN or Redis address given (a read
    replica's, with replica)."""
    if database(engine) == 'postgres':
        from data_interface.postgres.asyncpg_data import PostgresData
        return PostgresData(postgres, replica=replica)
    if database(engine) == 'redis':
        from data_interface.redis.redis_data import RedisData
        return RedisData(redis, engine.mode)
    return tarantool_driver(engine.driver)(tarantool, engine.mode)


def replicated(engine, primary, addresses, max_lag=None):
    """`primary` (an unstarted DataInterface) with reads spread over the
    engine's driver at these replica addresses (Tarantool addresses or
    PostgreSQL DSNs), if any are given."""
    if not addresses:
        return primary
    from data_interface.replicated import MAX_LAG, Replicated
    kind = database(engine)
    replicas = [data_for(engine, replica=True, **{kind: a}) for a in addresses]
    for r in replicas:    # the pool size set for the primary's
        for size in ('min_size', 'max_size'):
            if hasattr(primary, size):
                setattr(r, size, getattr(primary, size))
    names = ['replica %d (%s)' % (i, '%s:%s' % (a.host, a.port)
                                  if kind == 'tarantool' else r)
             for i, (a, r) in enumerate(zip(addresses, replicas), 1)]
    return Replicated(primary, replicas, max_lag or MAX_LAG, names)


def closest(name):
    """The engine name most like `name`, or None."""
    found = difflib.get_close_matches(name, BY_NAME, n=1, cutoff=0.0)
    return found[0] if found else None


def listing():
    """Human-readable table of all engines and whether they can run here."""
    rows = [('ENGINE', 'FRAMEWORK', 'LOOP', 'DRIVER', 'CONNECTIONS',
             'RUNS HERE')]
    for e in ENGINES:
        rows.append((e.name, e.framework, e.loop, e.driver, e.mode,
                     runs_here(e)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return '\n'.join('  '.join(c.ljust(w) for c, w in zip(r, widths)) + '  ' + r[-1]
                     for r in rows)
