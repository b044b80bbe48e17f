"""What this adapter is, for the framework table (runtime/frameworks.py)."""
# Django's ASGI handler, served on uvicorn as uvicorn_server serves any
# ASGI application.
NAME = 'django'
MODULES = ('django', 'uvicorn')
# Runs on CPython 3.7 (.venv37); on the main interpreter.
LEGACY = False
CURRENT = True
# Served through runtime/edge.py.
EDGE = True
# Packages whose frames a profile counts as this framework's: Django runs
# its synchronous parts (signals, closing a response) through asgiref.
PARTS = ('asgiref',)
