"""What a run will do and how long it should take, said before it starts."""
import time

from .guesses import combos, offers_rates
from .latency import budget, mixed
from .latency.report import searched
from .progress import clock
from .runner import given_databases

SHOWN = 6       # engine names listed; the rest counted


def minutes(seconds):
    """'about 4 min', 'about 40 s', 'about 2h05m'."""
    if seconds < 90:
        return 'about %d s' % (10 * round(seconds / 10.0) or seconds)
    if seconds < 3600:
        return 'about %d min' % round(seconds / 60.0)
    return 'about ' + clock(seconds)


def lines(s, seconds):
    """The plan of a run (engines, pages, durations) and its expected
    duration, as lines for stderr."""
    names = [e.name for e in s.engines]
    engines = ', '.join(names[:SHOWN]) + (
        ' and %d more' % (len(names) - SHOWN) if len(names) > SHOWN else '')
    out = ['plan: %d engine%s (%s)%s%s' % (
        len(names), '' if len(names) == 1 else 's', engines or 'none',
        ', each with its bare hello on ugly' if 'ugly' in s.pages and names else '',
        ', nginx' if any(True for _ in combos(s, 'nginx')) else '')]
    given = given_databases(s)
    if given:
        out.append('  given %s: %s' % (', '.join(given), (
            'engines on it start with --forget-visitors '
            '(--forget-visitors-in-given): every session and ballot it '
            'holds is removed' if s.forget_given else
            'engines on it start without --forget-visitors: its sessions and '
            'ballots stay (--forget-visitors-in-given removes them)')
            + '; the verification and the timed votes write into it'))
    if s.remotes:
        out.append('  sites: %s' % ', '.join(label for label, _ in s.remotes))
    closed = [p for p in s.pages if p != mixed.PAGE]
    if closed:
        out.append('  pages %s: %s, %d run%s of %d s after %d s of warmup' % (
            ', '.join(closed), ' and '.join(s.modes), s.runs,
            '' if s.runs == 1 else 's', s.duration, s.warmup))
    fixed = [p for p in s.pages if offers_rates(s, p)]
    if fixed:
        steps = (', '.join('%g/s' % r for r in s.rates) if s.rates else
                 ', '.join('%d' % round(f * 100) for f in s.fractions)
                 + ' % of saturation')
        out.append('  fixed rates for %s: %s, then up to %d probes for the '
                   'capacity at %s (a point that misses on it alone is run '
                   'again); %d s each, %s' % (
                       ', '.join(fixed), steps, budget.PROBES,
                       budget.label(s.slo), s.point_duration,
                       searched(s.runs, fixed, s.searches)))
        if s.confirm:
            out.append('  each capacity found offered again for %d s (a '
                       'miss steps it down)' % s.confirm)
    if s.profile:
        out.append('  plus one profiled run per engine and page%s' % (
            ' (not %s: no closed loop)' % mixed.PAGE if mixed.PAGE in s.pages else ''))
    if s.ceilings:
        out.append('  then the ceilings under the pages')
    out.append('expected: %s (estimate from bench/guesses.py; done near %s)'
               % (minutes(seconds), time.strftime(
                   '%H:%M' if seconds < 12 * 3600 else '%a %d %b %H:%M',
                   time.localtime(time.time() + seconds))))
    out.append('results: %s' % s.out)
    return out
