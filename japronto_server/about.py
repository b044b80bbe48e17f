"""What this adapter is, for the framework table (runtime/frameworks.py)."""
# Its last release has wheels for CPython <= 3.7 only.
NAME = 'japronto'
MODULES = ('japronto',)
# Runs on CPython 3.7 (.venv37); on the main interpreter.
LEGACY = True
CURRENT = False
# Served through runtime/edge.py.
EDGE = True
