"""What this adapter is, for the framework table (runtime/frameworks.py)."""
# Served on uvicorn, as uvicorn_server serves any ASGI application.
NAME = 'fastapi'
MODULES = ('fastapi', 'uvicorn')
# Runs on CPython 3.7 (.venv37); on the main interpreter.
LEGACY = False
CURRENT = True
# Served through runtime/edge.py.
EDGE = True
# Packages whose frames a profile counts as this framework's.
PARTS = ('starlette',)
