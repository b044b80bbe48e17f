"""One run's results from parts run apart (a matrix too long for one
sitting): each part a bench.py run on the same machine with the same load
settings and versions, on engines of its own. The references (bare hellos,
nginx) a part measured for its engines are pooled: their medians are over
every part's runs.

    python bench.py merge PART PART... --out DIR"""
import argparse
import json
import os
import sys

from . import charts, cost, html, report, results_file
from .latency import demand
from .wrk import PAGES

# What every part must share for its figures to sit in one table.
SAME = ('connections', 'duration', 'warmup', 'runs', 'wrk_threads',
        'pipeline', 'wrk_timeout', 'replicas', 'workers', 'storages')
SAME_LATENCY = ('generator', 'rates', 'fractions', 'slo', 'probes', 'duration',
                'confirm', 'headroom', 'noise', 'latency_correction')
LISTS = ('runs', 'profiles', 'latency', 'capacity', 'saturation')
REFERENCE_KINDS = ('hello', 'nginx')


class Refused(Exception):
    """Parts that cannot be one run; the message says why."""


def load(path):
    name = results_file.path(path)
    try:
        results = results_file.load(name)
    except (OSError, ValueError, EOFError) as e:
        raise Refused('%s: %s' % (name, e))
    if not isinstance(results, dict) or 'settings' not in results \
            or 'targets' not in results:
        raise Refused('%s is not a bench.py run' % name)
    if results.get('interrupted'):
        raise Refused('%s was interrupted: run that part again' % name)
    return results


def differ(what, values):
    if any(v != values[0] for v in values[1:]):
        raise Refused('the parts differ in %s: %s' % (
            what, ' / '.join(json.dumps(v) for v in values)))


def check(parts):
    """Refused unless the parts can sit in one table."""
    for key in SAME:
        differ(key, [p['settings'].get(key) for p in parts])
    lat = [p['settings'].get('latency') or {} for p in parts]
    for key in SAME_LATENCY:
        differ('latency ' + key, [x.get(key) for x in lat])
    differ('the mix', [{k: v for k, v in (x.get('mix') or {}).items()
                        if k != 'command'} for x in lat])
    differ('pinning', [p['pinning'] for p in parts])
    differ('machine', [{k: p['machine'].get(k) for k in ('cpu', 'cores',
                        'usable_cores', 'memory')} for p in parts])
    differ('versions', [p['versions'] for p in parts])
    seen = {}
    for i, p in enumerate(parts):
        for t in p['targets']:
            if t['kind'] in REFERENCE_KINDS:
                continue
            if t['name'] in seen:
                raise Refused('%s is in parts %d and %d: each engine in one '
                              'part' % (t['name'], seen[t['name']] + 1, i + 1))
            seen[t['name']] = i


def searches(parts):
    found = {}
    for p in parts:
        lat = p['settings'].get('latency') or {}
        counts = dict.fromkeys(lat.get('pages') or p['settings']['pages'],
                               p['settings']['runs'])
        counts.update(lat.get('searches') or {})   # else --runs times
        for page, n in counts.items():
            if found.setdefault(page, n) != n:
                raise Refused('the parts search %s a different number of '
                              'times: %d and %d' % (page, found[page], n))
    return found


def union(lists, order=None):
    out = list(dict.fromkeys(x for xs in lists for x in xs or ()))
    if not order:
        return out
    # pages the order does not name (the mix) after those it does
    return sorted(out, key=lambda x: order.index(x) if x in order else len(order))


def merge(parts):
    """The parts as one results.json (its demand and cost worked out
    again); Refused with the reason when they cannot be one run."""
    if len(parts) < 2:
        raise Refused('give two parts or more')
    check(parts)
    first = parts[0]
    settings = dict(first['settings'])
    settings['engines'] = union(p['settings']['engines'] for p in parts)
    settings['pages'] = union([p['settings']['pages'] for p in parts], PAGES)
    settings['modes'] = union(p['settings']['modes'] for p in parts)
    settings['pythons'] = union(p['settings'].get('pythons') for p in parts)
    if settings.get('latency'):
        lat = dict(settings['latency'])
        fixed = [(p['settings']['latency'] or {}).get('pages') for p in parts]
        lat['pages'] = None if None in fixed else union(fixed, PAGES)
        lat['searches'] = searches(parts)
        settings['latency'] = lat
    results = {k: v for k, v in first.items() if k not in LISTS}
    results.update(settings=settings,
                   started=min(p['started'] for p in parts),
                   finished=max(p.get('finished') or p['started'] for p in parts),
                   parts=[{'started': p['started'], 'finished': p.get('finished'),
                           'source': p.get('source'),
                           'engines': p['settings']['engines']} for p in parts])
    targets, names = [], set()
    for p in parts:
        for t in p['targets']:
            if t['name'] not in names:
                names.add(t['name'])
                targets.append(t)
    results['targets'] = targets
    for key in LISTS:
        results[key] = [r for p in parts for r in p.get(key) or ()]
    results['floor'] = [dict(f, part=i + 1) for i, p in enumerate(parts)
                        for f in p.get('floor') or ()]
    results['cluster_batches'] = next((p['cluster_batches'] for p in parts
                                       if p.get('cluster_batches')), None)
    disks = [(p['machine'].get('disk') or {}).get('bytes_per_s') for p in parts]
    if any(disks):
        results['machine'] = dict(first['machine'], disk={
            'bytes_per_s': min(d for d in disks if d)})
    if not results['cluster_batches']:
        del results['cluster_batches']
    results['demand'] = demand.summary(results)
    price = settings.get('core_hour_price')
    if price:
        results['cost'] = cost.records(results, price)
    return results


def main(argv):
    p = argparse.ArgumentParser(prog='bench.py merge', description=__doc__.split(
        '\n\n')[0])
    p.add_argument('parts', nargs='+', metavar='PART',
                   help="a run's folder (or its results.json)")
    p.add_argument('--out', required=True, metavar='DIR',
                   help='where the merged results.json, results.md, charts '
                        'and results.html go')
    args = p.parse_args(argv)
    try:
        results = merge([load(x) for x in args.parts])
    except Refused as e:
        p.print_usage(sys.stderr)
        print('bench.py merge: error: %s' % e, file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, 'results.json'), 'w') as f:
        json.dump(results, f, indent=1)
    print(report.write(results, args.out))
    print('\n'.join(charts.write(results, args.out)))
    print(html.write(args.out))
    return 0
