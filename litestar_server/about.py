"""What this adapter is, for the framework table (runtime/frameworks.py)."""
# Served on uvicorn, as uvicorn_server serves any ASGI application; the
# app has what the site does not use turned off, as a deployment would:
# no OpenAPI schema or docs pages, no logging config of its own, debug off.
NAME = 'litestar'
MODULES = ('litestar', 'uvicorn')
# Runs on CPython 3.7 (.venv37); on the main interpreter.
LEGACY = False
CURRENT = True
# Served through runtime/edge.py.
EDGE = True
# Packages whose frames a profile counts as this framework's.
PARTS = ('msgspec',)
