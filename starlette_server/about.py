"""What this adapter is, for the framework table (runtime/frameworks.py)."""
# Served on uvicorn, as uvicorn_server serves any ASGI application.
NAME = 'starlette'
MODULES = ('starlette', 'uvicorn')
# Runs on CPython 3.7 (.venv37); on the main interpreter.
LEGACY = False
CURRENT = True
# Served through runtime/edge.py.
EDGE = True
