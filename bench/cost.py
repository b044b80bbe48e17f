"""What a million requests cost on one core, per engine and page: at the
capacity within the latency budget where the page was offered fixed rates,
else at its closed-loop (plain) requests/s; a core at --core-hour-price."""
from .advise import PRICE, SOURCE, million_price
from .latency import budget
from .latency.cells import capacities
from .tables import FLAG, cells, table_md


def records(results, price=PRICE):
    """results.json's 'cost': the price and one row per engine and page."""
    workers = results['settings'].get('workers') or 1
    found, table = capacities(results), cells(results)
    rows = []
    for t in results['targets']:
        if t['kind'] != 'engine' or t['status'] != 'ok':
            continue
        for page in results['settings']['pages']:
            c = found.get((t['name'], page))
            if c is not None:
                basis, rate, bound = 'capacity', c['rate']['median'], c['open']
            else:
                basis, bound = 'saturation', False
                rate = (table.get((t['name'], page, 'plain')) or {}).get('rps')
            if rate is None:
                continue
            per_core = rate / workers
            rows.append({'target': t['name'], 'page': page, 'basis': basis,
                         'per_core': round(per_core, 1),
                         # a capacity kept at every rate tried: at most this
                         'upper_bound': bound,
                         # 5 significant figures: a fast page's cost is tiny
                         'per_million': per_core and float('%.5g' % (
                             million_price(price, per_core))) or None})
    return {'core_hour_price': price,
            'price_source': SOURCE if price == PRICE else 'given',
            'workers': workers, 'rows': rows}


def dollars(value):
    return '–' if value is None else '%.4f' % value


def section(results):
    """results.md's "Cost per million requests", or []."""
    cost = results.get('cost')
    if not cost or not cost['rows']:
        return []
    pages = list(dict.fromkeys(r['page'] for r in cost['rows']))
    basis = {r['page']: r['basis'] for r in cost['rows']}
    names = list(dict.fromkeys(r['target'] for r in cost['rows']))
    lat = results['settings'].get('latency')
    slo = budget.label(lat['slo']) if lat else None
    heads = ['%s (%s)' % (p, 'at capacity' if basis[p] == 'capacity'
                          else 'at saturation') for p in pages]
    by = {(r['target'], r['page']): r for r in cost['rows']}
    rows = []
    for name in names:
        cells_ = []
        for page in pages:
            r = by.get((name, page))
            text = dollars(r and r['per_million'])
            if r and r['basis'] != basis[page]:
                text += ' (%s)' % r['basis']
            cells_.append(('≤ ' if r and r['upper_bound'] else '') + text)
        rows.append([name] + cells_)
    pinned = results.get('pinning', {}).get('server')
    lines = ['', '## Cost per million requests', '',
             'Dollars per million requests on one core at $%g per core-hour '
             '(%s; bench.py --core-hour-price): the core-hour\'s price ÷ the '
             'requests one core serves in an hour. "At capacity": the highest '
             'rate within %s (the capacity table); "at saturation": the '
             'closed-loop median requests/s, plain, which no latency budget '
             'held. %s%s "≤": the capacity kept the budget at every rate '
             'tried, so the cost is at most this; "–": no rate kept it.' % (
                 cost['core_hour_price'], cost['price_source'],
                 slo or 'the budget',
                 'A core: the one the server process and the database it '
                 'started shared (pinned together).' if pinned else
                 '%s Not pinned: the server and its database may have used '
                 'more than one core.' % FLAG,
                 '' if cost['workers'] == 1 else
                 ' With %d processes per engine, requests/s ÷ %d.'
                 % (cost['workers'], cost['workers'])), '']
    return lines + table_md(['engine'] + heads, rows)
