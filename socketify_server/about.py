"""What this adapter is, for the framework table (runtime/frameworks.py)."""
# uWebSockets owns the sockets: its own limits stand in for edge's.
NAME = 'socketify'
MODULES = ('socketify',)
# Runs on CPython 3.7 (.venv37); on the main interpreter.
LEGACY = False
CURRENT = True
# Served through runtime/edge.py.
EDGE = False
