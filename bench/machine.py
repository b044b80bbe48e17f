"""What the numbers were measured on: hardware, system and versions."""
import os
import platform
import subprocess
import sys

from runtime import frameworks
from runtime.databases import table
from runtime.settings import ROOT

# The versions recorded: every framework's and driver's, and what they use.
PACKAGES = tuple(dict.fromkeys(
    [m for f in frameworks.TABLE if f.current for m in f.modules]
    + [m for d in table.DRIVERS if d.current for m in d.modules]
    + ['uvloop', 'hiredis', 'jinja2']))


def _first(path, prefix):
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(prefix):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return None


def os_name():
    try:
        with open('/etc/os-release') as f:
            for line in f:
                if line.startswith('PRETTY_NAME='):
                    return line.split('=', 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.platform()


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _output(argv, stderr=False):
    """First line a tool prints about itself, or None."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20,
                              cwd=ROOT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (done.stderr if stderr else done.stdout) or done.stdout or done.stderr
    return text.strip().splitlines()[0] if text.strip() else None


def package_version(name):
    import importlib.metadata   # 3.8+: imported here so tests collect on 3.7
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def describe():
    memory = _first('/proc/meminfo', 'MemTotal')
    status = _output(['git', 'status', '--porcelain'])
    return {
        'machine': {
            'cpu': _first('/proc/cpuinfo', 'model name') or platform.processor(),
            'cores': os.cpu_count(),
            'usable_cores': sorted(os.sched_getaffinity(0)),
            'memory': memory,
            'kernel': '%s %s' % (platform.release(), platform.version()),
            'os': os_name(),
            'debian_version': _read('/etc/debian_version'),
        },
        'versions': {
            'python': sys.version.split()[0],
            'packages': {p: package_version(p) for p in PACKAGES},
            **{db.name: _output(db.version_command())
               if db.version_command() else None for db in table.TABLE},
            'nginx': _output(['nginx', '-v'], stderr=True),
            'wrk': _output(['wrk', '-v']),
        },
        'source': {
            'commit': _output(['git', 'rev-parse', 'HEAD']),
            'modified': bool(status),
        },
    }
