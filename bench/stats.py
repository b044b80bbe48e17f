"""Pure arithmetic over wrk runs: medians, ratios and what gets a run flagged."""
import json
import statistics

# A run is flagged when more than this share of its requests went wrong.
FLAG_SHARE = 0.01
SOCKET_ERRORS = ('connect', 'read', 'write', 'timeout')


class WrkOutputError(ValueError):
    pass


def parse_wrk(stdout):
    """The JSON line a wrk_scripts/ script prints last, as a dict."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith('{'):
            try:
                report = json.loads(line)
            except ValueError as e:
                raise WrkOutputError('bad report line %r: %s' % (line[:200], e))
            missing = {'requests', 'seconds', 'requests_per_sec', 'latency_ms',
                       'socket_errors', 'non2xx'} - set(report)
            if missing:
                raise WrkOutputError('report line lacks %s' % ', '.join(sorted(missing)))
            return report
    raise WrkOutputError('no report line in wrk output (did the script fail?)')


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def ratio(a, b):
    """a / b, or None when either is unknown or b is zero."""
    if a is None or not b:
        return None
    return a / b


def socket_errors(report):
    return sum(report['socket_errors'].get(k, 0) for k in SOCKET_ERRORS)


def problems(run):
    """Why a timed run should not be trusted as is; [] when it is fine."""
    found = []
    if run.get('exit_code') not in (0, None):
        found.append('wrk exited with %s' % run['exit_code'])
    report = run.get('wrk')
    if report is None:
        found.append(run.get('error') or 'no wrk report')
        return found
    requests = report['requests']
    if requests <= 0:
        found.append('no request completed')
        requests = 1
    if report['non2xx'] > FLAG_SHARE * requests:
        found.append('%.1f%% non-2xx' % (100.0 * report['non2xx'] / requests))
    errors = socket_errors(report)
    if errors > FLAG_SHARE * requests:
        kinds = ', '.join('%s %d' % (k, report['socket_errors'][k])
                          for k in SOCKET_ERRORS if report['socket_errors'].get(k))
        found.append('%.1f%% socket errors (%s)' % (100.0 * errors / requests, kinds))
    check = run.get('vote_check')
    if check is not None and not check.get('ok'):
        found.append(check.get('reason', 'vote count mismatch'))
    return found


def summarize(runs):
    """One cell of the report from the timed runs of one target, page and
    mode: medians over runs (min-max of requests/s), errors summed, flags."""
    reports = [r['wrk'] for r in runs if r.get('wrk')]
    rps = [r['requests_per_sec'] for r in reports]
    flags = []
    for r in runs:
        flags.extend('run %d: %s' % (r['run'], p) for p in problems(r))
    return {
        'runs': len(runs),
        'rps': median(rps),
        'rps_min': min(rps) if rps else None,
        'rps_max': max(rps) if rps else None,
        'p50': median([r['latency_ms'].get('p50') for r in reports]),
        'p99': median([r['latency_ms'].get('p99') for r in reports]),
        'requests': sum(r['requests'] for r in reports),
        'errors': sum(r['non2xx'] + socket_errors(r) for r in reports),
        'flags': flags,
        'votes_checked': sum(1 for r in runs if r.get('vote_check')),
        'votes_ok': sum(1 for r in runs if (r.get('vote_check') or {}).get('ok')),
    }


def vote_check(before, after, report):
    """Did the site's vote total move by the POSTs wrk saw succeed? wrk
    stops without reading the last answers, so up to the POSTs it sent (one
    in flight per connection) may count too, but never fewer than its 2xx."""
    check = {'before': before, 'after': after}
    if before is None or after is None or report is None:
        check.update(ok=False, reason='vote total unknown')
        return check
    moved = after - before
    counted, sent = report.get('votes', 0), report.get('posts', 0)
    check.update(moved=moved, posts_2xx=counted, posts_sent=sent)
    check['ok'] = counted <= moved <= sent and counted > 0
    if not check['ok']:
        check['reason'] = ('vote total moved by %d; wrk saw %d POSTs answered '
                           '2xx of %d sent' % (moved, counted, sent))
    return check
