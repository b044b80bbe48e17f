"""The machine's latency floor, taken before and after a --latency run:
nginx's /ugly (C, no database, a few % of its saturation) at a fixed rate,
and how steady the server's core runs (steady.py). What nginx's p99 shows,
the host alone adds to every engine's; where it misses the budget, or the
core often runs at under half speed, the host can miss it for any engine,
and the report says so next to the capacities."""
import os
import statistics

from runtime.processes import free_port
from ..nginx import Nginx
from . import budget, oha, steady

RATE = 500          # requests/s
RUNS = 3
DURATION = 3        # seconds per run
GUESS = 2.0 + RUNS * (DURATION + 0.5) + steady.SECONDS   # seconds, for the ETA


def measure(matrix, when):
    """{'when', 'rate', 'duration', 'runs': [{'p50', 'p99', 'max', 'miss'}],
    'core': steady.probe()} of nginx at RATE and the server's core, or
    {'when', 'error'} when nginx could not be measured."""
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
    matrix.progress.show('machine floor (%s) · how steady the server\'s core '
                         'runs' % when)
    core = steady.measure(s.pin['server'])
    matrix.progress.advance(steady.SECONDS + 1)
    return {'when': when, 'rate': RATE, 'duration': DURATION, 'runs': runs,
            'core': core}


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
    cores = [f.get('core') for f in taken if f.get('core')]
    probed = [c for c in cores if 'slow_pct' in c]
    if probed:
        out[0] += (' The server\'s core ran at under half speed in %s %% of '
                   'its 10 ms windows (at worst %s of its usual pace, for up '
                   'to %d ms in a row).' % (
                       ', '.join('%.1f' % c['slow_pct'] for c in probed),
                       min(c['min'] for c in probed),
                       max(c['longest_ms'] for c in probed)))
    out += [c['error'] for c in cores if 'error' in c]
    return out + warnings(runs, probed, slo)


# The floor's warnings (results.html fills the same in: bench/ranking.js).
MISSED = ('⚠ %d of %d floor runs missed %s with no work to speak of: on this '
          'machine a stall of the host alone can miss the budget, so a capacity '
          'here says as much about the host as about the stack.')
UNSTEADY = ('⚠ the server\'s core ran at under half speed in more than %g %%%% of '
            'its 10 ms windows: the host slows it in bursts that nginx\'s short '
            'requests hardly notice, but a Python server\'s queue behind, so a %%s '
            'capacity here is set by the host more than by the stack.'
            % steady.SLOW_SHARE)


def warnings(runs, probed, slo):
    """The floor runs that missed slo, and a core too often slow for it."""
    out = []
    missed = [r for r in runs if missed_by(r, slo)]
    if missed:
        out.append(MISSED % (len(missed), len(runs), budget.label(slo)))
    if steady.unsteady(probed, slo):
        out.append(UNSTEADY % budget.label(slo))
    return out


def embedded(floors):
    """What results.html needs to say warnings() for any budget, or None."""
    taken = [f for f in floors or () if f.get('runs')]
    if not taken:
        return None
    cores = [f.get('core') for f in taken if f.get('core')]
    return {'runs': [r for f in taken for r in f['runs']],
            'probes': [{'slow_pct': c['slow_pct'], 'longest_ms': c.get('longest_ms', 0)}
                       for c in cores if 'slow_pct' in c],
            'errors': [c['error'] for c in cores if 'error' in c],
            'slow_share': steady.SLOW_SHARE, 'missed': MISSED, 'unsteady': UNSTEADY}
