"""What this adapter is, for the framework table (runtime/frameworks.py)."""
# Served on uvicorn, as uvicorn_server serves any ASGI application (Quart's
# docs name Hypercorn; edge wraps uvicorn's protocol, so uvicorn it is).
NAME = 'quart'
MODULES = ('quart', 'uvicorn')
# Runs on CPython 3.7 (.venv37); on the main interpreter.
LEGACY = False
CURRENT = True
# Served through runtime/edge.py.
EDGE = True
# Packages whose frames a profile counts as this framework's.
PARTS = ('werkzeug', 'blinker')
