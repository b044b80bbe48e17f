"""Every engine of the benchmark, built from its dimensions.

An engine is framework x database driver and connection mode x event loop,
named FRAMEWORK-DRIVER-MODE[-uvloop], e.g. sanic-tarantool-one-uvloop.
"""
import difflib
import importlib.util
import sys
from collections import namedtuple

Engine = namedtuple('Engine', 'name framework driver mode loop')

FRAMEWORKS = ('aiohttp', 'sanic')
# driver name -> (database, connection modes)
DRIVERS = (
    ('tarantool', 'tarantool', ('one', 'multi')),
    ('postgres', 'postgres', ('pool',)),
)
LOOPS = ('asyncio', 'uvloop')

# What each dimension needs importable in this interpreter.
MODULES = {
    'aiohttp': 'aiohttp', 'sanic': 'sanic', 'uvloop': 'uvloop',
    'tarantool': 'asynctnt', 'postgres': 'asyncpg',
}


def _build():
    engines = []
    for framework in FRAMEWORKS:
        for driver, _, modes in DRIVERS:
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


def unavailable(engine):
    """Why the engine cannot run in this interpreter, or None if it can."""
    for part in (engine.framework, engine.driver, engine.loop):
        module = MODULES.get(part)
        if module and importlib.util.find_spec(module) is None:
            return '%s is not installed for Python %d.%d' % (
                module, sys.version_info[0], sys.version_info[1])
    return None


def closest(name):
    """The engine name most like `name`, or None."""
    found = difflib.get_close_matches(name, BY_NAME, n=1, cutoff=0.0)
    return found[0] if found else None


def listing():
    """Human-readable table of all engines and whether they can run here."""
    rows = [('ENGINE', 'FRAMEWORK', 'LOOP', 'DRIVER', 'CONNECTIONS', 'RUNS HERE')]
    for e in ENGINES:
        why = unavailable(e)
        rows.append((e.name, e.framework, e.loop, e.driver, e.mode,
                     'yes' if why is None else 'no: ' + why))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return '\n'.join('  '.join(c.ljust(w) for c, w in zip(r, widths)) + '  ' + r[-1]
                     for r in rows)
