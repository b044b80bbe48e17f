"""The latency budget (--slo p99=10ms) and the search for the highest rate
that keeps it: pure arithmetic over fixed-rate points."""
import re

from .oha import FIGURES

DEFAULT = 'p99=10ms'
# A point keeps the budget only if the generator offered what was asked.
ACHIEVED = 0.9
PROBES = 3      # extra fixed-rate runs per search, after the rate steps
# Most tries of a rate that missed on the percentile alone: a second one
# always, a third when the host ran slow during the second (fixed_rate).
TRIES = 3
# A search's capacity is run again for longer (--confirm, 10 s): a miss steps
# it down, to the highest rate the search kept below, else by STEP_DOWN, at
# most CONFIRMS rates.
CONFIRMS = 3
STEP_DOWN = 0.8
# Share of a search's points expected to miss on the percentile alone and
# be run again, for time estimates: 0.4-0.6 in single-engine runs, 0.64 in
# the 2026-11-26 run of 20 engines (whose estimate came out 5 % short).
# Third runs (on a slow host) are not counted: there a run takes longer.
RETRIED = 0.5
UNITS = {'us': 0.001, 'µs': 0.001, 'ms': 1.0, 's': 1000.0}


def parse(text):
    """'p99=10ms' -> {'percentile': 'p99', 'ms': 10.0}; ValueError says why."""
    match = re.fullmatch(r'\s*(p[0-9.]+|max)\s*[=<]=?\s*([0-9.]+)\s*(us|µs|ms|s)\s*',
                         text or '')
    if not match:
        raise ValueError('%r is not PERCENTILE=BUDGET, e.g. p99=10ms' % text)
    percentile, value, unit = match.groups()
    if percentile not in FIGURES:
        raise ValueError('percentile %s: choose from %s'
                         % (percentile, ', '.join(FIGURES)))
    try:
        budget = float(value) * UNITS[unit]
    except ValueError:
        raise ValueError('%r is not a number' % value)
    if budget <= 0:
        raise ValueError('the budget must be above zero')
    return {'percentile': percentile, 'ms': budget}


def label(slo):
    budget = slo['ms']
    text = ('%g ms' % budget) if budget >= 1 else ('%g µs' % (budget * 1000))
    return '%s ≤ %s' % (slo['percentile'], text)


def verdict(report, slo):
    """Why a point misses the budget, or None when it keeps it."""
    return served(report) or over(report, slo)


def served(report):
    """Why a point did not serve what was asked (errors, a rate short of
    the offer), or None."""
    if report is None:
        return 'no report'
    errors = sum(report['errors'].values()) + report['non2xx']
    if errors:
        return '%d errors' % errors
    if report['achieved'] < ACHIEVED * report['offered']:
        return 'achieved %.0f of %.0f/s' % (report['achieved'], report['offered'])
    return None


def over(report, slo):
    """The percentile past the budget, or None."""
    value = report['latency_ms'].get(slo['percentile'])
    if value is None or value > slo['ms']:
        return '%s %s ms' % (slo['percentile'], value)
    return None


def stall_like(record, slo):
    """True when a point missed on the percentile alone: every request
    answered at the rate asked, the votes adding up. One stall of the
    machine does that; a rate past the capacity does it every time. Such a
    point is run once more, and its rate counts as missed only if both
    miss."""
    report = record.get('oha')
    return (not record['kept'] and served(report) is None
            and (record.get('vote_check') or {'ok': True})['ok']
            and over(report, slo) is not None)


def bracket(points):
    """(lo, hi) from [(rate, kept)]: the highest kept rate below the lowest
    missed one (None if none), and that missed rate (None if all kept); a
    rate is missed when every point at it missed."""
    held = {}
    for rate, kept in points:     # a rate tried twice is kept if either kept
        held[rate] = held.get(rate, False) or kept
    missed = [r for r, kept in held.items() if not kept]
    hi = min(missed) if missed else None
    kept = [r for r, k in held.items() if k and (hi is None or r < hi)]
    return (max(kept) if kept else None), hi


def next_probe(points, saturation):
    """The next rate to try, or None when the search is done: above the
    highest kept rate up to 1.5x saturation while nothing missed, else the
    middle of the bracket (from zero if nothing was kept)."""
    lo, hi = bracket(points)
    if hi is None:
        step = saturation if (lo or 0.0) < saturation else lo * 1.2
        return step if step <= 1.5 * saturation else None
    return ((lo or 0.0) + hi) / 2.0


def capacity(points):
    """{'rate', 'open'} from a search's points: the highest kept rate below
    the lowest missed one; open when nothing missed (the capacity is at
    least the rate), rate 0 when nothing kept."""
    lo, hi = bracket(points)
    return {'rate': lo or 0.0, 'open': hi is None, 'missed_at': hi}


def step_down(points, rate):
    """The rate to confirm after `rate` missed: the highest rate the search
    kept below it, else STEP_DOWN of it."""
    kept = [r for r, k in points if k and r < rate * 0.999]
    return max(kept) if kept else rate * STEP_DOWN
