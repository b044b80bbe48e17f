"""Copies of the checkout for tests that run server.py from a tree of its
own (its var/, its local databases on ports of their own)."""
import os
import shutil
import signal
import tempfile

import pytest

from runtime.processes import state
from runtime.settings import ROOT

KEEP_OUT = ('.git', 'var', 'test-artifacts', 'results', '__pycache__',
            '.pytest_cache')


def copy_checkout(target):
    """The checkout's files (the virtualenvs as symlinks) at target."""
    shutil.copytree(ROOT, target, symlinks=True,
                    ignore=shutil.ignore_patterns(*KEEP_OUT))
    return target


def processes_of(path):
    """Running processes (not zombies) whose command line or working
    directory is inside path."""
    found = []
    for entry in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open('/proc/%s/cmdline' % entry, 'rb') as f:
                command = f.read()
            cwd = os.readlink('/proc/%s/cwd' % entry)
        except OSError:
            continue
        if (path.encode() in command or (cwd + '/').startswith(path + '/')) \
                and state(int(entry)) not in (None, 'Z'):
            found.append(int(entry))
    return found


@pytest.fixture
def checkout():
    # Reachable by the postgres user (unlike pytest's tmp_path when root):
    # the cluster stays in var/; test_install has one that cannot be.
    parent = tempfile.mkdtemp(prefix='stickers-test-checkout-')
    os.chmod(parent, 0o755)
    yield copy_checkout(os.path.join(parent, 'checkout'))
    shutil.rmtree(parent, ignore_errors=True)


@pytest.fixture
def bare_checkout():
    """A copy of the checkout's files without var/ (nor the virtualenvs:
    servers run with this interpreter, and a test may hand the copy to
    another account), in a directory any user may enter."""
    parent = tempfile.mkdtemp(prefix='stickers-test-checkout-')
    os.chmod(parent, 0o755)
    target = os.path.join(parent, 'checkout')
    shutil.copytree(ROOT, target, symlinks=True, ignore=shutil.ignore_patterns(
        *(KEEP_OUT + ('.venv', '.venv37', 'docs'))))
    yield target
    try:
        for pid in processes_of(target):    # a failed test's
            os.kill(pid, signal.SIGKILL)
    finally:
        shutil.rmtree(parent, ignore_errors=True)
