"""bench.py compare A B: every figure both runs have, the change from A to
B with its noise band, the ones beyond noise marked better or worse; exit
status 1 when something got worse beyond noise.

    python bench.py compare A B [--noise PCT] [--out FILE]

A and B: result folders or their results.json."""
import argparse
import sys

from . import instructions, tables
from .results_file import load
from .pythons import short
from .latency.cells import capacities, steps
from .latency.noise import spread

INSTRUCTIONS = 'instructions/request'
FLOOR = 10.0        # % a change must pass even when the runs agree closely
ONE_RUN = 30.0      # % band of a figure measured once (this VM drifts so)
LATENCY_FLOOR_MS = 0.5  # latency changes smaller than this are noise
# A percentile with fewer requests beyond it in a run is shown, not judged.
TAIL = 10


def figures(results):
    """{key: (median, min, max, runs, higher is better)}; key: (figure,
    target, page, mode or rate step); every target named with its
    interpreter, as a run of several names them ('aiohttp-…@3.11')."""
    found = {}
    pythons = {t['name']: t.get('python') for t in results['targets']}
    main = results.get('versions', {}).get('python') or '?'

    def named(name):
        if name == tables.NGINX:
            return name
        base, _, version = name.partition('@')
        return '%s@%s' % (base, short(version or pythons.get(name) or main))

    for key, c in tables.cells(results).items():
        if len(key) == 3 and c['rps'] is not None:
            found[('req/s', named(key[0])) + key[1:]] = (c['rps'], c['rps_min'], c['rps_max'],
                                       c['runs'], True)
    for (target, page, rate), c in steps(results).items():
        for f, beyond in (('p50', 0.5), ('p99', 0.01)):
            t = c['latency_ms'][f]
            if t['median'] is not None:
                fewest = (c.get('requests') or {}).get('min') or 0
                found[(f + ' ms', named(target), page, rate)] = (
                    t['median'], t['min'], t['max'], t['runs'], False,
                    fewest * beyond < TAIL)
    for r in results.get('instructions') or []:
        if 'per_request' in r:
            n = r['per_request']
            found[(INSTRUCTIONS, named(r['engine']), r['page'], '–')] = (
                n, n, n, len(r['runs']), False)
    for (target, page), c in capacities(results).items():
        t = c['rate']
        found[('capacity/s', named(target), page, 'at ' + label(c['slo']))] = (
            t['median'], t['min'], t['max'], t['runs'], True, False,
            100.0 * (c.get('resolution') or 0))
    return found


def label(slo):
    return '%s=%gms' % (slo['percentile'], slo['ms'])


def band(a, b, floor):
    """The noise band (%) of a figure: the larger spread of the two runs'
    runs, or of a capacity's search bracket, at least the floor; a figure
    measured once gets ONE_RUN."""
    spreads = []
    for median, low, high, runs in (a[:4], b[:4]):
        spreads.append(ONE_RUN if runs < 2 else 100.0 * (spread([low, high, median]) or 0))
    # A capacity is known to within its search's bracket: searches that
    # all stop at the same step agree, but only to that step.
    spreads += [f[6] for f in (a, b) if len(f) > 6]
    return max([floor] + spreads)


def verdict(key, a, b, floor):
    """(change %, band %, 'better' | 'worse' | 'too few requests' | None)."""
    if not a[0]:
        return None, None, None
    change = 100.0 * (b[0] - a[0]) / a[0]
    # A count repeats within a fraction of this; a timing's band would hide it.
    width = instructions.NOISE if key[0] == INSTRUCTIONS else band(a, b, floor)
    if a[5:6] == (True,) or b[5:6] == (True,):
        return change, width, 'too few requests'
    if abs(change) <= width:
        return change, width, None
    if key[0].endswith(' ms') and abs(b[0] - a[0]) < LATENCY_FLOOR_MS:
        return change, width, None
    higher_better = a[4]
    return change, width, 'better' if (change > 0) == higher_better else 'worse'


def value(key, v):
    return tables.ms(v) if key[0].endswith(' ms') else tables.number(v)


def compare(a, b, floor=FLOOR):
    """(markdown lines, number of figures worse beyond noise)."""
    fa, fb = figures(a), figures(b)
    common = [k for k in fa if k in fb]
    rows = []
    for key in common:
        change, width, said = verdict(key, fa[key], fb[key], floor)
        rows.append((key, change, width, said))
    order = {'worse': 0, 'better': 1, None: 2, 'too few requests': 3}
    rows.sort(key=lambda r: order[r[3]])
    worse = sum(1 for r in rows if r[3] == 'worse')
    better = sum(1 for r in rows if r[3] == 'better')
    thin = sum(1 for r in rows if r[3] == 'too few requests')
    lines = ['# Comparison', '',
             '- A: %s, commit %s' % (a.get('started'), commit(a)),
             '- B: %s, commit %s' % (b.get('started'), commit(b)),
             '- %d figures in both: %d worse, %d better beyond noise, %d within '
             'it, %d on too few requests; %d only in A, %d only in B' % (
                 len(rows), worse, better, len(rows) - worse - better - thin, thin,
                 len(set(fa) - set(fb)), len(set(fb) - set(fa))),
             '- Noise band: the larger spread (max - min) / median of either '
             'run\'s runs or a capacity\'s search bracket, at least %g%%; '
             '%g%% for a figure measured once; '
             'latency changes under %g ms are noise; a percentile with fewer '
             'than %d requests beyond it in a run is shown, not judged; '
             'instruction counts: ±%g%%' % (
                 floor, ONE_RUN, LATENCY_FLOOR_MS, TAIL, instructions.NOISE), '']
    table = [[k[0], k[1], k[2], k[3], value(k, fa[k][0]), value(k, fb[k][0]),
              '–' if c is None else '%+.1f%%' % c,
              '–' if w is None else '±%.0f%%' % w, said or 'within noise']
             for k, c, w, said in rows]
    lines += tables.table_md(['figure', 'engine', 'page', 'mode / rate', 'A',
                              'B', 'change', 'noise band', ''], table,
                             numeric=False)
    return lines, worse


def commit(results):
    source = results.get('source') or {}
    return (source.get('commit') or '?')[:12] + (
        ' (with local changes)' if source.get('modified') else '')


def main(argv):
    p = argparse.ArgumentParser(prog='bench.py compare', description=__doc__.split('\n\n')[0])
    p.add_argument('a', metavar='A', help='the earlier run: a folder or results.json')
    p.add_argument('b', metavar='B', help='the later run')
    p.add_argument('--noise', type=float, default=FLOOR, metavar='PCT',
                   help='the smallest band, in %% (default %g)' % FLOOR)
    p.add_argument('--out', metavar='FILE', help='also write the table here')
    args = p.parse_args(argv)
    try:
        a, b = load(args.a), load(args.b)
    except (OSError, ValueError) as e:
        p.error('cannot read results: %s' % e)
    try:
        lines, worse = compare(a, b, args.noise)
    except (KeyError, TypeError) as e:
        p.error('not a bench.py results.json: missing %s' % e)
    text = '\n'.join(lines) + '\n'
    sys.stdout.write(text)
    if args.out:
        with open(args.out, 'w') as f:
            f.write(text)
    return 1 if worse else 0
