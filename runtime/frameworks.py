"""The framework table: one line per adapter folder. Each folder declares
itself in its `about.py` (read without importing the framework) and has
its bare hello world in `hello.py`.

An adapter (the folder's package) provides the coroutine

    async def serve(site, host, port, stopped, limits=edge.LIMITS)

which serves `site` (a pages.Site) on host:port, through runtime/edge.py
where the framework's protocol is Python (`edge` in about.py), binding with
SO_REUSEPORT when `limits.reuse_port` is set (several workers on one port),
until the asyncio.Event `stopped` is set; it then finishes the requests in
progress and returns. The loop is server.py's, already running.
"""
import importlib.util
import inspect
import os
import sys
from collections import namedtuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The adapter folders, in the order engines are listed.
FOLDERS = (
    'aiohttp_server',
    'sanic_server',
    'japronto_server',
    'uvicorn_server',
    'granian_server',
    'fastapi_server',
    'starlette_server',
    'litestar_server',
    'falcon_server',
    'quart_server',
    'socketify_server',
    'blacksheep_server',
    'granian_rsgi_server',
    'robyn_server',
    'django_server',
)

# name: as in engine names; modules: what must be importable; legacy /
# current: runs in the CPython 3.7 environment / the main one; edge: served
# through runtime/edge.py (else the framework's own limits stand in); parts:
# other packages whose frames a profile counts as the framework's;
# needs_front: no limits against hostile clients, so served beyond the
# loopback only behind a front server (server.py --proxy).
Framework = namedtuple('Framework', 'name folder modules legacy current edge '
                       'parts needs_front')
CONTRACT = ('site', 'host', 'port', 'stopped', 'limits')


def load_file(folder, name):
    """The module `folder/name.py`, loaded by its path: the package's
    __init__ (the framework itself) is not imported. It is in sys.modules
    as `folder_name` (Litestar reads a handler's module there)."""
    path = os.path.join(ROOT, folder, name + '.py')
    spec = importlib.util.spec_from_file_location(
        '%s_%s' % (folder, name), path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _declared(folder):
    about = load_file(folder, 'about')
    return Framework(folder=folder, modules=tuple(about.MODULES),
                     legacy=about.LEGACY, current=about.CURRENT,
                     edge=about.EDGE, name=about.NAME,
                     parts=tuple(getattr(about, 'PARTS', ())),
                     needs_front=getattr(about, 'NEEDS_FRONT', False))


TABLE = tuple(_declared(folder) for folder in FOLDERS)
BY_NAME = {f.name: f for f in TABLE}
NAMES = tuple(f.name for f in TABLE)


def adapter(name):
    """The adapter package of framework `name`, imported (with its
    framework); TypeError if its serve() breaks the contract."""
    module = importlib.import_module(BY_NAME[name].folder)
    params = tuple(inspect.signature(module.serve).parameters)
    if params != CONTRACT or not inspect.iscoroutinefunction(module.serve):
        raise TypeError('%s.serve%s is not async serve(%s)'
                        % (module.__name__, params, ', '.join(CONTRACT)))
    return module


def hello(name):
    """The bare hello world of framework `name`: a module with
    serve(loop, host, port)."""
    return load_file(BY_NAME[name].folder, 'hello')
