"""One fixed-rate oha run: its command, its JSON report reduced to what
results.json keeps, and the CPU oha itself used (its headroom)."""
import json
import os
import shutil
import subprocess
import tempfile
import time

from runtime.settings import ROOT

VERSION = '1.16.0'      # run.sh installs this one: cargo install --locked
PERCENTILES = ('p50', 'p90', 'p99', 'p99.9')
FIGURES = PERCENTILES + ('max',)
# oha's share of its cores above which its own speed may be what was timed.
HEADROOM = 0.9
INSTALL = ('oha %s is missing: ./run.sh setup builds it with cargo '
           '(Rust 1.88 or newer; see install.md)' % VERSION)


def find():
    """The path of oha, or None: the pinned version in cargo's bin
    directory or on PATH, else any oha there."""
    cargo = os.path.join(os.environ.get('CARGO_HOME') or
                         os.path.expanduser('~/.cargo'), 'bin', 'oha')
    found = [p for p in (cargo, shutil.which('oha')) if p and os.access(p, os.X_OK)]
    pinned = [p for p in found if version(p) == VERSION]
    return (pinned or found or [None])[0]


def version(path):
    try:
        done = subprocess.run([path, '--version'], capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip().split()[-1] if done.returncode == 0 else None


def command(oha, url, rate, duration, connections, timeout, pin=(),
            correction=True):
    """argv of a run offering `rate` requests/s for `duration` s over at
    most `connections` connections. With correction (the default) each
    request's latency counts from when it was due, not from when a free
    connection sent it, so a stall is counted for every request it held up."""
    argv = list(pin) + [
        oha, '--no-tui', '--output-format', 'json', '-q', '%g' % rate,
        '-z', '%gs' % duration, '-c', str(connections), '-t', '%gs' % timeout,
        '-w', '--disable-compression', url]
    if correction:
        argv.insert(len(pin) + 1, '--latency-correction')
    return argv


def placeholder(argv, option, name):
    """argv with the value after `option` named, not given (results.json
    keeps each point's command once, so)."""
    argv = list(argv)
    argv[argv.index(option) + 1] = name
    return argv


def cores_of(argv):
    """How many cores a pinned command may use."""
    if argv[0] == 'taskset':
        cores = 0
        for part in argv[2].split(','):
            low, _, high = part.partition('-')
            cores += int(high or low) - int(low) + 1
        return cores
    return len(os.sched_getaffinity(0))


def run(argv, duration, offered, read=None):
    """Run oha (or another generator whose report `read` parses); the
    record results.json keeps of it."""
    record = {'command': argv, 'offered': offered}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        try:
            process = subprocess.Popen(argv, stdout=out, stderr=err, cwd=ROOT,
                                       stdin=subprocess.DEVNULL)
        except OSError as e:
            record.update(error='cannot run %s: %s' % (argv[0], e), oha=None)
            return record
        _, status, usage = wait(process, duration + 60)
        wall = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode('utf-8', 'replace'), \
            err.read().decode('utf-8', 'replace')
    record['exit_code'] = status
    if stderr.strip():
        record['stderr'] = stderr.strip()[-2000:]
    if usage is not None:
        cpu = usage.ru_utime + usage.ru_stime
        record['generator'] = {'cpu_s': round(cpu, 3), 'wall_s': round(wall, 3),
                               'share': round(cpu / wall / cores_of(argv), 3)}
    try:
        record['oha'] = (read or parse)(stdout)
    except ValueError as e:
        record.update(oha=None, error='%s; stderr: %s' % (e, stderr.strip()[-500:]))
    return record


def wait(process, timeout):
    """(pid, exit status, rusage) of a finished process; it is killed when
    it runs past timeout (rusage None, status None)."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return pid, process.returncode, usage
        if time.monotonic() > deadline:
            process.kill()
            process.wait()
            return process.pid, None, None
        time.sleep(0.05)


def parse(stdout):
    """oha's JSON report as {achieved, requests, latency_ms, status, errors,
    ok, timeouts}; latency in ms by percentile name."""
    start = stdout.find('{')
    if start < 0:
        raise ValueError('no JSON report in oha output')
    try:
        report = json.loads(stdout[start:])
        summary = report['summary']
        percentiles = report['latencyPercentiles']
        statuses = {int(k): v for k, v in report['statusCodeDistribution'].items()}
        errors = dict(report['errorDistribution'])
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError('unexpected oha report: %s' % e)
    answered = sum(statuses.values())
    latency = {p: seconds_to_ms(percentiles.get(p)) for p in PERCENTILES}
    latency['max'] = seconds_to_ms(summary.get('slowest'))
    return {
        'seconds': summary['total'],
        'requests': answered,
        'achieved': answered / summary['total'] if summary['total'] else 0.0,
        'ok': sum(v for k, v in statuses.items() if 200 <= k < 300),
        'non2xx': sum(v for k, v in statuses.items() if not 200 <= k < 300),
        'status': statuses,
        'errors': errors,
        'timeouts': sum(v for k, v in errors.items() if 'timeout' in k.lower()),
        'latency_ms': latency,
    }


def seconds_to_ms(value):
    return None if value is None else round(value * 1000.0, 3)
