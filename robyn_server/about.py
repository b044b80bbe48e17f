"""What this adapter is, for the framework table (runtime/frameworks.py)."""
# actix-web (Rust) owns the connections: its own limits stand in for edge's
# (docs/robyn.md).
NAME = 'robyn'
MODULES = ('robyn',)
# Runs on CPython 3.7 (.venv37); on the main interpreter (Robyn needs 3.10+).
LEGACY = False
CURRENT = True
# Served through runtime/edge.py.
EDGE = False
# Holds slow and idle clients and whole bodies without limit: server.py
# serves it beyond the loopback only behind a front server named with
# --proxy (docs/robyn.md).
NEEDS_FRONT = True
