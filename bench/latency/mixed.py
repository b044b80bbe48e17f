"""The mixed workload of bench.py --latency --pages mix: visitors arrive at
a fixed rate, each GETs / (a session and a ballot) then votes with that
ballot or reads /good, /bad, /about or a pack (loadgen/, built by run.sh).
A run gives the figures oha's do, per request kind too, and its votes are
checked against the site's vote total."""
import json
import os

from runtime.settings import ROOT
from . import oha

PAGE = 'mix'
VERSION = '0.1.0'       # loadgen/Cargo.toml
VISIT = 2               # requests per visit: GET /, then a vote or a page
VOTE = 0.7              # the share of visitors who vote
BINARY = os.path.join(ROOT, 'loadgen', 'target', 'release', 'loadgen')
INSTALL = ('loadgen is not built: ./run.sh setup builds it with cargo '
           '(cargo build --release --locked in loadgen/; see install.md)')


def find():
    return BINARY if os.access(BINARY, os.X_OK) else None


def command(path, url, rate, duration, connections, timeout, pin=(), closed=0):
    """argv offering `rate` requests/s (rate / VISIT visitors/s) for
    `duration` s over at most `connections` connections; with closed, that
    many visitors back to back instead."""
    load = (['--closed', str(closed)] if closed
            else ['--rate', '%g' % (rate / VISIT)])
    return list(pin) + [path, '--url', url] + load + [
        '--duration', '%g' % duration, '--connections', str(connections),
        '--timeout', '%g' % timeout, '--vote', '%g' % VOTE]


def figures(kind):
    statuses = {int(k): v for k, v in kind['status'].items()}
    errors = dict(kind['errors'])
    return {'requests': sum(statuses.values()),
            'ok': sum(v for k, v in statuses.items() if 200 <= k < 300),
            'non2xx': sum(v for k, v in statuses.items() if not 200 <= k < 300),
            'status': statuses, 'errors': errors,
            'timeouts': errors.get('timeout', 0),
            'latency_ms': {f: kind['latency_ms'].get(f) for f in oha.FIGURES}}


def kind_figures(kind):
    """A request kind's figures, shorter: those answered other than 2xx
    and those not answered are counted together as failed."""
    f = figures(kind)
    return {'requests': f['requests'],
            'failed': f['non2xx'] + sum(f['errors'].values()),
            'latency_ms': {k: f['latency_ms'][k] for k in KIND_FIGURES}}


KIND_FIGURES = ('p50', 'p90', 'p99', 'max')


def parse(stdout):
    """loadgen's report in oha's shape (parse in oha.py), plus per request
    kind, the votes answered 200 and loadgen's own CPU seconds."""
    start = stdout.find('{')
    if start < 0:
        raise ValueError('no JSON report in loadgen output')
    try:
        report = json.loads(stdout[start:])
        result = figures(report['overall'])
        result.update(
            seconds=report['seconds'],
            achieved=(result['requests'] / report['seconds']
                      if report['seconds'] else 0.0),
            kinds={k: kind_figures(v) for k, v in report['kinds'].items()},
            votes_ok=report['votes_ok'],
            # the latest loadgen sent a visit's first request past its due
            # time: counted in every latency, as the server's
            schedule_lag_ms=report.get('schedule_lag_ms'),
            generator_cpu_s=round(report['cpu_s']['user']
                                  + report['cpu_s']['system'], 3))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError('unexpected loadgen report: %s' % e)
    return result


def run(argv, duration, offered):
    """One loadgen run: oha.run's record, its report read by parse."""
    return oha.run(argv, duration, offered, read=parse)


def vote_check(before, after, report):
    """Did the site's vote total move by exactly the votes answered 200?
    loadgen reads every answer before it exits, so any other count is a
    vote lost or counted twice (or one that timed out, yet was cast)."""
    check = {'before': before, 'after': after}
    if before is None or after is None or report is None:
        check.update(ok=False, reason='vote total unknown')
        return check
    moved, answered = after - before, report['votes_ok']
    check.update(moved=moved, votes_ok=answered, ok=moved == answered)
    if not check['ok']:
        check['reason'] = ('the vote total moved by %d but %d votes were '
                           'answered 200' % (moved, answered))
    return check
