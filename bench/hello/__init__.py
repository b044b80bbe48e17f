"""Bare hello-world servers, one per framework (its adapter folder's
hello.py): /ugly answers the plain text UGLY (Content-Type text/plain;
charset=utf-8) through the framework's most direct API, with no database and none of the site's code. The benchmark
times them next to the engines as each framework's ceiling.

    python -m bench.hello FRAMEWORK [--uvloop] [-p PORT] [--host HOST]

Kept CPython 3.7 compatible: japronto's runs in the legacy environment.
"""
