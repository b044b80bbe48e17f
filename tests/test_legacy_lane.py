"""The legacy lane (CPython 3.7, without the benchmark's packages) must
collect: one module that imports what 3.7 lacks stops the whole lane."""
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.bench  # it starts an interpreter

PYTHON = os.path.join(ROOT, '.venv37', 'bin', 'python')


@pytest.mark.skipif(not os.path.exists(PYTHON),
                    reason='no .venv37 (run.sh builds it where CPython 3.7 is)')
def test_the_legacy_lane_collects_every_module():
    run = subprocess.run([PYTHON, '-m', 'pytest', '-q', '--collect-only',
                          '-m', 'legacy', '-p', 'no:cacheprovider'],
                         cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, universal_newlines=True,
                         timeout=120)
    assert run.returncode == 0, run.stdout[-3000:]
    assert 'error' not in run.stdout.splitlines()[-1], run.stdout[-3000:]
