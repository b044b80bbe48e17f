"""The machine's latency floor, taken before and after a --latency run:
nginx's /ugly (C, no database, a few % of its saturation) at a fixed rate.
What its p99 shows, the host alone adds to every engine's. Where a run of
it misses the budget, a stall of the machine can miss it for any engine,
and the report says so next to the capacities."""
import os
import statistics

from runtime.processes import free_port
from ..nginx import Nginx
from . import budget, oha

RATE = 500          # requests/s
RUNS = 3
DURATION = 3        # seconds per run
GUESS = 1.0 + RUNS * (DURATION + 0.5)    # seconds of one floor, for the ETA


def measure(matrix, when):
    """{'when', 'rate', 'duration', 'runs': [{'p50', 'p99', 'max', 'miss'}]}
    of nginx at RATE, or {'when', 'error'} when it could not be taken."""
    s = matrix.s
    server = Nginx(os.path.join(s.out, 'floor'), free_port(), None,
                   s.pin['server'])
    runs = []
    try:
        server.start()
        for run in range(1, RUNS + 1):
            matrix.progress.show('machine floor (%s) · nginx /ugly %d/s · run '
                                 '%d/%d' % (when, RATE, run, RUNS))
            record = oha.run(oha.command(
                s.oha, server.url + '/ugly', RATE, DURATION, s.connections,
                s.timeout, s.pin['wrk']), DURATION, RATE)
            matrix.progress.advance(DURATION + 0.5)
            report = record.get('oha')
            if report is None:
                return {'when': when, 'error': record.get('error') or 'no report'}
            report['offered'] = RATE
            runs.append(dict({f: report['latency_ms'].get(f)
                              for f in ('p50', 'p99', 'max')},
                             miss=budget.verdict(report, s.slo)))
    except RuntimeError as e:       # nginx did not start
        return {'when': when, 'error': str(e)}
    finally:
        server.stop()
    return {'when': when, 'rate': RATE, 'duration': DURATION, 'runs': runs}


def missed_by(run, slo):
    """Did a floor run miss this budget (its own percentile when kept)?"""
    value = run.get(slo['percentile'])
    return bool(run['miss']) if value is None else value > slo['ms']


def lines(floors, slo):
    """What the floor says, as markdown paragraphs (none without one)."""
    taken = [f for f in floors or () if f.get('runs')]
    if not taken:
        return ['Machine floor: not taken (%s).' % '; '.join(
            f['error'] for f in floors if f.get('error'))] if floors else []
    runs = [r for f in taken for r in f['runs']]
    known = [r['p99'] for r in runs if r['p99'] is not None]
    each = '; '.join('%s %s ms' % (f['when'], ', '.join(
        '–' if r['p99'] is None else '%.1f' % r['p99'] for r in f['runs']))
        for f in taken)
    out = ['Machine floor (what the host alone adds): nginx\'s `/ugly` at '
           '%d requests/s, %d s runs, p99 %s%s.' % (
               taken[0]['rate'], taken[0]['duration'], each,
               ' (median %.1f ms)' % statistics.median(known) if known else '')]
    missed = [r for r in runs if missed_by(r, slo)]
    if missed:
        out.append('⚠ %d of %d floor runs missed %s with no work to speak of: '
                   'on this machine a stall of the host alone can miss the '
                   'budget, so a capacity here says as much about the host as '
                   'about the stack.' % (len(missed), len(runs),
                                         budget.label(slo)))
    return out
