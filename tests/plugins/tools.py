"""What a test does when a program it runs is missing.

wrk, nginx and py-spy: ./run.sh installs them (Debian's packages,
requirements.txt), so a test without one fails, as the browser test does
without Chromium. oha and loadgen: run.sh builds them only where there is
a cargo new enough (install.md), so on a developer's machine without one
their tests are skipped with the reason; under CI (CI=true, as .ci/run is
run) they fail, so that a run without them does not pass for a whole one."""
import os
import shutil

import pytest

from bench.latency import mixed, oha


def in_ci():
    return os.environ.get('CI', '').lower() in ('1', 'true', 'yes')


def not_built(message):
    """Skip, or under CI fail, with `message`."""
    if in_ci():
        pytest.fail('%s (CI=true: every test must run)' % message,
                    pytrace=False)
    pytest.skip(message)


def need(*names):
    """Fail unless each program named is on PATH (wrk, nginx)."""
    missing = [n for n in names if shutil.which(n) is None]
    if missing:
        pytest.fail('%s missing: ./run.sh setup installs it'
                    % ' and '.join(missing), pytrace=False)


def need_py_spy():
    from bench import profile      # the main environment's only
    if profile.py_spy() is None:
        pytest.fail('py-spy missing: ./run.sh setup installs it '
                    '(requirements.txt)', pytrace=False)


def cargo():
    """Whether a cargo is there to build oha and loadgen with: on PATH or
    in cargo's bin directory, where run.sh looks."""
    home = os.environ.get('CARGO_HOME') or os.path.expanduser('~/.cargo')
    path = shutil.which('cargo') or os.path.join(home, 'bin', 'cargo')
    return os.access(path, os.X_OK)


def need_oha():
    """oha's path; without one, a failure when a cargo is there (run.sh
    should have built it), else not_built."""
    path = oha.find()
    if path is None:
        if not cargo():
            not_built('no cargo here, so no oha (see install.md)')
        pytest.fail(oha.INSTALL, pytrace=False)
    return path


def need_loadgen():
    path = mixed.find()
    if path is None:
        if not cargo():
            not_built('no cargo here, so no loadgen (see install.md)')
        pytest.fail(mixed.INSTALL, pytrace=False)
    return path
