"""What this adapter is, for the framework table (runtime/frameworks.py)."""
# The site as a bare application on granian's RSGI interface (its native
# one; granian_server serves ASGI): its Rust core's limits stand in for
# edge's.
NAME = 'rsgi'
MODULES = ('granian',)
# Runs on CPython 3.7 (.venv37); on the main interpreter.
LEGACY = False
CURRENT = True
# Served through runtime/edge.py.
EDGE = False
