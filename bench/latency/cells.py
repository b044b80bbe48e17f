"""Latency results reduced to cells: per target, page and rate step the
figures of its runs (median, min, max), and per target and page the
capacity within the budget."""
from .noise import noisy, triple
from .oha import FIGURES

# A mix run whose generator sent a visit this late (ms) is flagged: the
# host did not run it in time, and the latencies count the wait.
LAG_MS = 5.0


def steps(results):
    """{(target, page, rate label): cell} over the rate steps (not the
    search's probes and its capacity's longer run)."""
    groups = {}
    for r in results.get('latency') or []:
        if r['rate'] not in ('probe', 'confirm'):
            groups.setdefault((r['target'], r['page'], r['rate']), []).append(r)
    return {key: step(records) for key, records in groups.items()}


def step(records):
    reports = [r.get('oha') for r in records]
    ok = [x for x in reports if x]
    cell = {'runs': len(records),
            'offered': triple([r['offered'] for r in records]),
            'achieved': triple([x['achieved'] for x in ok]),
            'requests': triple([x['requests'] for x in ok]),
            'errors': sum(sum(x['errors'].values()) + x['non2xx'] for x in ok)
            + len(reports) - len(ok),
            'timeouts': sum(x['timeouts'] for x in ok),
            'latency_ms': {f: triple([x['latency_ms'].get(f) for x in ok])
                           for f in FIGURES},
            'us_per_request': {k: triple([(r.get('us_per_request') or {}).get(k)
                                          for r in records])
                               for k in ('server', 'database')},
            'kept': sum(1 for r in records if r.get('kept')),
            'kinds': kinds(ok),
            'flags': []}
    if any(not r.get('headroom', True) for r in records):
        shares = [r['generator']['share'] for r in records if r.get('generator')]
        cell['flags'].append('generator busy (%.0f%% of its core): the rate '
                             'may be its limit' % (100 * max(shares)))
    lags = [x.get('schedule_lag_ms') or 0.0 for x in ok]
    if lags and max(lags) > LAG_MS:
        cell['flags'].append('loadgen fell up to %.0f ms behind its schedule '
                             '(counted in the latencies)' % max(lags))
    slow = [r['host'] for r in records if (r.get('host') or {}).get('slow')]
    if slow:
        cell['flags'].append('the host ran slow during %d of %d runs (up to '
                             '%d ms in a row)' % (len(slow), len(records), max(
                                 h['longest_ms'] for h in slow)))
    for r in records:
        check = r.get('vote_check') or {'ok': True}
        if not check['ok']:
            cell['flags'].append('run %s: %s' % (r['run'], check['reason']))
    for f in ('p50', 'p99'):
        if noisy([x['latency_ms'].get(f) for x in ok]):
            cell['flags'].append('noisy %s' % f)
    return cell


def kinds(reports):
    """{kind: {'requests', 'errors', 'p50', 'p99', 'max'}} of a mix's runs
    (triples over the runs); {} for a page."""
    names = sorted({k for x in reports for k in x.get('kinds') or {}})
    found = {}
    for name in names:
        each = [x['kinds'][name] for x in reports if name in (x.get('kinds') or {})]
        found[name] = dict(
            requests=triple([k['requests'] for k in each]),
            errors=sum(failed(k) for k in each),
            **{f: triple([k['latency_ms'].get(f) for k in each])
               for f in ('p50', 'p99', 'max')})
    return found


def failed(kind):
    """A mix kind's requests not answered 2xx (a run before 'failed' kept
    them as non2xx and errors)."""
    if 'failed' in kind:
        return kind['failed']
    return sum(kind['errors'].values()) + kind['non2xx']


def capacities(results):
    """{(target, page): {'rate': triple, 'open': bool, 'slo', 'pair',
    'host': searches stopped by a rate missed only on a slow host,
    'below': when no search kept a rate, the highest one they missed at}}."""
    groups = {}
    for c in results.get('capacity') or []:
        groups.setdefault((c['target'], c['page']), []).append(c)
    cells = {}
    for key, found in groups.items():
        rates = [c['rate'] for c in found]
        # How finely the searches placed it: the widest gap between a rate
        # kept and the next one missed.
        gaps = [c['missed_at'] / c['rate'] - 1 for c in found
                if c.get('missed_at') and c['rate']]
        cells[key] = {'rate': triple(rates), 'open': any(c['open'] for c in found),
                      'resolution': max(gaps) if gaps else None,
                      'saturation': triple([c['saturation'] for c in found]),
                      'slo': found[0]['slo'], 'pair': found[0].get('pair'),
                      'noisy': noisy(rates),
                      'host': sum(1 for c in found if c.get('host')),
                      'below': None if any(rates) else
                      max([c.get('missed_at') or 0 for c in found]) or None,
                      # how each search's capacity fared in its longer run
                      'confirmed': [c.get('confirmed') for c in found
                                    if c.get('confirmed')],
                      'searched': triple([c.get('searched', c['rate'])
                                          for c in found])}
    return cells
