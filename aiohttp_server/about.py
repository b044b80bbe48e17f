"""What this adapter is, for the framework table (runtime/frameworks.py)."""
NAME = 'aiohttp'
MODULES = ('aiohttp',)
# Runs on CPython 3.7 (.venv37); on the main interpreter.
LEGACY = True
CURRENT = True
# Served through runtime/edge.py.
EDGE = True
# Packages whose frames a profile counts as this framework's.
PARTS = ('multidict', 'yarl')
