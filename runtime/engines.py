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

from runtime import frameworks
from runtime.databases import table

Engine = namedtuple('Engine', 'name framework driver mode loop')

LOOPS = ('asyncio', 'uvloop')
LEGACY = os.path.join(frameworks.ROOT, '.venv37')
LEGACY_HOWTO = ('needs CPython 3.7: install it (pyenv install 3.7.16) '
                'and run ./run.sh setup')


def _build():
    engines = []
    for framework in frameworks.TABLE:
        for driver in table.DRIVERS:
            # Only where one interpreter takes both.
            if not ((framework.legacy and driver.legacy)
                    or (framework.current and driver.current)):
                continue
            for mode in driver.modes:
                for loop in LOOPS:
                    name = '-'.join([framework.name, driver.name, mode]
                                    + (['uvloop'] if loop == 'uvloop' else []))
                    engines.append(Engine(name, framework.name, driver.name,
                                          mode, loop))
    return tuple(engines)


ENGINES = _build()
BY_NAME = {e.name: e for e in ENGINES}


def database(engine):
    """The name of the engine's database (see runtime/databases/table.py)."""
    return table.DRIVER[engine.driver].database


def _modules(engine):
    """[(module, runs only in the legacy environment)] the engine needs."""
    framework = frameworks.BY_NAME[engine.framework]
    driver = table.DRIVER[engine.driver]
    parts = [(m, not framework.current) for m in framework.modules]
    parts += [(m, not driver.current) for m in driver.modules]
    if engine.loop == 'uvloop':
        parts.append(('uvloop', False))
    return parts


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
    for module, legacy_only in _modules(engine):
        if importlib.util.find_spec(module) is None:
            if legacy_only and version != '3.7':
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
               for module, _ in _modules(engine)):
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
