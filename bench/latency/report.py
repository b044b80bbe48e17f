"""The latency sections of results.md: capacity within the budget first,
then per page the figures at each fixed rate."""
from .. import tables
from ..stats import ratio
from . import budget, demand, floor, mixed
from .cells import capacities, steps
from .noise import NOISE

FLAG = tables.FLAG
HOST = ('%s searches that stopped at a rate missed only while the host ran '
        'slow, at every try (the host watch; on a steady host the capacity '
        'may be higher): %s')
NOISY = '%s cells whose runs\' capacities differ by more than %d%%: %s'
CONFIRMED = {'again': 'held on its second try (the first missed on the '
                      'percentile alone)',
             'stepped down': 'missed, and was stepped down to a rate that '
                             'held',
             'not held': 'missed, and so did every rate it was stepped '
                         'down to'}


def rate(value):
    return tables.number(value)


def spread(t, show=tables.number):
    """'median (min–max)' of a triple; the median alone for one run."""
    if t['median'] is None:
        return '–'
    if t['runs'] < 2:
        return show(t['median'])
    return '%s (%s–%s)' % (show(t['median']), show(t['min']), show(t['max']))


def capacity_table(results, names, pages):
    found = capacities(results)
    slo = results['settings']['latency']['slo']
    present = [n for n in names if any((n, p) in found for p in pages)]
    pages = [p for p in pages if any((n, p) in found for n in present)]
    if not present:
        return []
    lines = ['## Capacity at %s' % budget.label(slo), '',
             'The highest offered rate (requests/s) whose %s stayed within '
             '%g ms with no errors, median (min–max) of the runs\' searches; '
             '"≥" where even the highest rate tried kept it, "<" where '
             'even the lowest missed. In brackets: '
             'the share of the same engine\'s saturation rate (closed loop, '
             '%d connections) measured in the same run.'
             % (slo['percentile'], slo['ms'],
                results['settings']['connections']), '']
    for said in floor.lines(results.get('floor'), slo):
        lines += [said, '']
    lines += ['![capacity %s](chart-capacity-%s.png)' % (p, p) for p in pages]
    lines += [''] if pages else []
    seconds = results['settings']['latency'].get('confirm')
    if seconds:
        lines += ['Each search\'s capacity was offered again for %d s: the '
                  'capacity is the rate that held there.' % seconds, '']
    rows, noisy, host, confirmed = [], {}, {}, {}
    for name in present:
        cells = []
        for page in pages:
            c = found.get((name, page))
            if c is None:
                cells.append('–')
                continue
            cells.append(capacity_cell(c))
            if c['noisy']:
                noisy.setdefault(name, []).append(page)
            for how in dict.fromkeys(c['confirmed']):
                if how in CONFIRMED:
                    n = c['confirmed'].count(how)
                    confirmed.setdefault(how, []).append(
                        '%s %s (%ssearched %s)' % (
                            name, page, '' if c['rate']['runs'] < 2 else
                            '%d of %d searches, ' % (n, c['rate']['runs']),
                            spread(c['searched'])))
            if c['host']:
                host.setdefault(name, []).append(
                    page if c['rate']['runs'] < 2 else '%s (%d of %d searches)' % (
                        page, c['host'], c['rate']['runs']))
        rows.append([name] + cells)
    notes = ([NOISY % (FLAG, NOISE * 100, by_engine(noisy))] if noisy else []) \
        + ([HOST % (FLAG, by_engine(host))] if host else [])
    notes += ['%s capacities whose %d s run %s: %s' % (
        FLAG, seconds, CONFIRMED[how], '; '.join(where))
        for how, where in sorted(confirmed.items())]
    lines += tables.table_md(['engine'] + pages, rows)
    once = sorted({p for (n, p), c in found.items()
                   if n in present and c['rate']['runs'] < 2})
    if once:
        notes.append('%s: one search each (no range, so never noisy: how far a '
                     'second would move it is not known)' % ', '.join(once))
    return lines + ([''] + ['- ' + n for n in notes] if notes else [])


def capacity_cell(c):
    """'median (min–max) (share)', '≥ ...' when open, '< N (< share)' when
    no search kept a rate (N: the highest rate they missed at)."""
    flag = ' ' + FLAG if c['noisy'] or c['host'] else ''
    sat = c['saturation']['median']
    if c['below']:
        return '< %s (< %s)%s' % (tables.number(c['below']),
                                  tables.times(ratio(c['below'], sat)), flag)
    return '%s%s (%s)%s' % ('≥ ' if c['open'] else '', spread(c['rate']),
                            tables.times(ratio(c['rate']['median'], sat)), flag)


def by_engine(cells):
    """'engine page, page; engine page' of {engine: [page]}."""
    return '; '.join('%s %s' % (name, ', '.join(pages))
                     for name, pages in cells.items())


def page_tables(results, names, page):
    cells = steps(results)
    keys = [k for k in cells if k[1] == page]
    if not keys:
        return []
    lines = ['', '### %s · fixed rates' % page, '',
             '![latency %s](chart-latency-%s.png)' % (page, page), '']
    headers = ['engine', 'rate', 'offered/s', 'achieved/s', 'p50 ms',
               'p90 ms', 'p99 ms', 'p99.9 ms', 'max ms', 'errors',
               'server µs/req', 'database µs/req']
    rows, notes = [], []
    for name in names:
        for key in [k for k in keys if k[0] == name]:
            c = cells[key]
            lat = c['latency_ms']
            rows.append([name, key[2], rate(c['offered']['median']),
                         rate(c['achieved']['median']),
                         tables.ms(lat['p50']['median']),
                         tables.ms(lat['p90']['median']),
                         spread(lat['p99'], tables.ms),
                         tables.ms(lat['p99.9']['median']),
                         tables.ms(lat['max']['median']),
                         tables.number(c['errors'])
                         + (' ' + FLAG if c['flags'] else ''),
                         tables.us(c['us_per_request']['server']['median']),
                         tables.us(c['us_per_request']['database']['median'])])
            notes += ['%s %s %s %s: %s' % (FLAG, name, page, key[2],
                                           tables.plain(f)) for f in c['flags']]
    lines += tables.table_md(headers, rows)
    lines += kind_table(cells, names, keys)
    return lines + ([''] + ['- ' + n for n in notes] if notes else [])


CAUSES = ('gc', 'periodic', 'callback', 'blocked', 'unsampled', 'database',
          'host')


def stall_table(results, names, pages):
    """Per engine and page, over its fixed-rate points: the serving loop's
    stalls per second by cause (runtime/stalls.py), and the longest."""
    rows = []
    for name in names:
        for page in pages:
            points = [r for r in results['latency']
                      if r.get('target') == name and r.get('page') == page]
            records = [r['stalls'] for r in points if r.get('stalls')]
            if not records:
                if points and 'stalls' in points[0]:   # recorded none
                    rows.append([name, page, '0'] + ['–'] * (len(CAUSES) + 2))
                continue
            seconds = sum(r['seconds'] for r in records)
            kept = [r['stalls'] for r in at_capacity(results, name, page)
                    if r.get('stalls')]
            rows.append([name, page, str(len(records))] + [
                '%.2f' % (sum(r['causes'].get(c, {}).get('per_s', 0)
                              * r['seconds'] for r in records) / seconds)
                for c in CAUSES] + [longest(records), longest(kept)])
    if not rows:
        return []
    return ['', "The serving loop's stalls over 3 ms during the fixed-rate "
            'points, per second by cause (gc: the collector; periodic: the '
            "site's own; callback: a request's code; blocked: asleep in a call; "
            'unsampled: held in C; database: no CPU while the database ran a '
            'snapshot, checkpoint or rewrite; host: no CPU otherwise), the '
            'longest and its cause, and the longest '
            'at the capacity found (the points of the rate each search kept); '
            'points: those with a record (– where the server recorded none):',
            ''] + tables.table_md(
        ['engine', 'page', 'points'] + list(CAUSES) + ['longest ms',
                                                       'at capacity ms'], rows)


def longest(records):
    """The longest stall of some points' records, with its cause."""
    found = [(c['max_ms'], cause) for r in records
             for cause, c in r['causes'].items()]
    if not found:
        return tables.ms(max([r['max_ms'] for r in records] or [None]))
    ms, cause = max(found)
    return '%s %s' % (tables.ms(ms), cause)


def at_capacity(results, name, page):
    """The fixed-rate points of name and page at the rate its search (that
    run's) found as the capacity."""
    found = {(c.get('pair'), c.get('run')): c.get('rate')
             for c in results.get('capacity') or []
             if c.get('target') == name and c.get('page') == page}
    return [r for r in results['latency']
            if r.get('target') == name and r.get('page') == page
            and found.get((r.get('pair'), r.get('run'))) is not None
            and abs((r.get('offered') or 0) - found[r.get('pair'), r.get('run')]) < 1e-6]


def kind_table(cells, names, keys):
    """The mix's figures per request kind, at each rate step."""
    rows = []
    for name in names:
        for key in [k for k in keys if k[0] == name]:
            for kind, c in sorted(cells[key]['kinds'].items()):
                rows.append([name, key[2], kind, tables.number(c['requests']['median']),
                             tables.ms(c['p50']['median']), spread(c['p99'], tables.ms),
                             tables.ms(c['max']['median']), tables.number(c['errors'])])
    if not rows:
        return []
    return ['', 'Per request kind (medians of the runs; each latency from '
            'when that request was due):', ''] + tables.table_md(
        ['engine', 'rate', 'kind', 'requests', 'p50 ms', 'p99 ms', 'max ms',
         'errors'], rows)


def header_line(results):
    """The load line of the header, for a latency run."""
    lat = results['settings']['latency']
    s = results['settings']
    offered = (', '.join('%g' % r for r in lat['rates']) + ' requests/s'
               if lat['rates'] else
               ', '.join('%d%%' % round(f * 100) for f in lat['fractions'])
               + ' of each page\'s saturation rate')
    only = lat.get('pages')     # the others were timed closed loop only
    fixed = only or s['pages']
    mix = lat.get('mix')
    tools = ([lat['generator']] if any(p != mixed.PAGE for p in fixed) else []) + (
        ['%s for %s' % (mix['generator'], mixed.PAGE)] if mix and mixed.PAGE in fixed
        else [])
    return ('- Fixed rates%s: %s with latency correction (each request timed '
            'from when it was due), %s, %d s each, at most %d connections, '
            'timeout %d s; then up to %d probes searching the capacity at %s'
            % (' (%s only)' % ', '.join(only) if only else '',
               ' and '.join(tools) or lat['generator'], offered,
               lat.get('duration', s['duration']), s['connections'],
               s['wrk_timeout'], lat['probes'], budget.label(lat['slo']))
            + ('; a point that missed on the percentile alone was run again, '
               'its rate missed only if both did' if lat.get('again') else '')
            + '; ' + searched(s['runs'], [p for p in s['pages'] if p in fixed],
                              lat.get('searches') or {})
            + mix_line(mix))


def searched(runs, pages, searches):
    """'searched 3 times' or, where pages differ, each page's count."""
    def said(n):
        return 'once' if n == 1 else '%d times' % n
    counts = [searches.get(p) or runs for p in pages]
    if len(set(counts)) <= 1:
        return 'searched %s' % said(counts[0] if counts else runs)
    return 'searched ' + ', '.join('%s %s' % (p, said(n))
                                     for p, n in zip(pages, counts))


def mix_line(mix):
    if not mix:
        return ''
    return ('\n- mix: %s; visitors arrive at half the offered rate, each GETs / '
            '(a session and a ballot), then votes with that ballot (%d%%) or '
            'reads /good, a pack, /bad or /about (40/30/20/10 of the rest); '
            'each request timed from when it was due; after each run the '
            'site\'s vote total must have moved by the votes answered 200; '
            'its saturation: as many visitors as connections, back to back'
            % (mix['generator'], round(mix['vote'] * 100)))


def sections(results, names):
    """(lines that open the report, lines of the per-page section)."""
    if not results['settings'].get('latency'):
        return [], {}
    pages = results['settings']['pages']
    first = capacity_table(results, names, pages) + stall_table(
        results, names, pages) + demand.section(results, names)
    return first, {page: page_tables(results, names, page) for page in pages}
