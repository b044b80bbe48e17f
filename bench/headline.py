"""The mix by database: per framework, the mix's capacity within the
budget on each database driver the run has (the median of its searches,
their range where they differ by more than the noise), so a reader can
take the column of the database they will run. results.md carries it; the
README's lead table is printed from the committed run by

    python -m bench.headline docs/results"""
import os
import sys

from runtime import engines
from . import results_file
from .latency.cells import capacities

# Columns, in this order, for the drivers a run has.
DRIVERS = (('tarantool', 'Tarantool'), ('postgres', 'PostgreSQL (asyncpg)'),
           ('psycopg', 'PostgreSQL (psycopg)'), ('redis', 'Redis'),
           ('rediscluster', 'Redis Cluster'),
           ('sqlalchemy', "SQLAlchemy's ORM"), ('django', "Django's ORM"))


def cell(found):
    """'3,400 (3,022–3,495) ⚠', '< 200' (no search kept a rate; 200 the
    highest missed) or '–' (not searched)."""
    if not found:
        return '–'
    rate = found['rate']
    low, median, high = rate['min'], rate['median'], rate['max']
    if not high and found['below']:
        return '< {:,}'.format(round(found['below']))
    text = '{:,}'.format(round(median or 0))
    if round(low) != round(high):
        text += ' ({:,}–{:,})'.format(round(low), round(high))
    return text + (' ⚠' if found['noisy'] else '')


def grid(results, page='mix'):
    """(drivers [(name, title)], rows [(framework, {driver: cell})]) of the
    run's engines that searched `page`, rows by their best capacity."""
    found = capacities(results)
    by = {}
    for (name, p), c in found.items():
        engine = engines.BY_NAME.get(name)
        if p != page or engine is None:
            continue
        by.setdefault(engine.framework, {})[engine.driver] = c
    present = {d for row in by.values() for d in row}
    drivers = [d for d in DRIVERS if d[0] in present]

    def best(item):
        return -max(c['rate']['median'] or 0 for c in item[1].values())
    rows = [(framework, {d: cell(row.get(d)) for d, _ in drivers})
            for framework, row in sorted(by.items(),
                                         key=lambda i: (best(i), i[0]))]
    return drivers, rows


def table(results, page='mix'):
    """Markdown lines, or [] when the run searched no engine on `page`."""
    drivers, rows = grid(results, page)
    if not rows:
        return []
    slo = (results['settings'].get('latency') or {}).get('slo') or {}
    lines = ['| framework | %s |' % ' | '.join(
                 '%s, %s ≤ %g ms' % (title, slo.get('percentile', 'p99'),
                                     slo.get('ms', 10))
                 for _, title in drivers),
             '|---|%s' % ('---:|' * len(drivers))]
    for framework, cells in rows:
        lines.append('| %s | %s |' % (framework, ' | '.join(
            cells[d] for d, _ in drivers)))
    return lines


def section(results):
    """results.md's section, when the run has the mix on two databases or
    more."""
    drivers, rows = grid(results)
    if len(drivers) < 2:
        return []
    return ['## The mix by database', '',
            'Requests/s of the mix each framework kept within the budget '
            'on each database (the median of its searches; their range '
            'where they differ; ⚠ where they differ by more than the noise; '
            '"< N": no search kept a rate, N the highest one missed at; –: '
            'not in this run).', ''] + table(results) + ['']


def main(argv):
    path = argv[0] if argv else os.path.join('docs', 'results')
    path = results_file.path(path)
    lines = table(results_file.load(path))
    if not lines:
        print('%s searched no engine on the mix' % path, file=sys.stderr)
        return 1
    print('\n'.join(lines))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
