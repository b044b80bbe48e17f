"""What the report, the charts and compare share: the timed runs of a
results.json grouped by row, and the markdown table helpers."""
import re

from .stats import summarize

NGINX = 'nginx'
FLAG = '⚠'


def cells(results):
    """{(target, page, mode): summary} over the timed runs; a hello
    reference's runs paired with an engine also under (target, page, mode,
    engine)."""
    groups = {}
    for run in results['runs']:
        if not run.get('warmup'):
            key = (run['target'], run['page'], run['mode'])
            groups.setdefault(key, []).append(run)
            if run.get('pair'):
                groups.setdefault(key + (run['pair'],), []).append(run)
    return {key: summarize(runs) for key, runs in groups.items()}


def targets(results):
    """Names that have timed runs (closed-loop or fixed-rate): engines in
    run order, then the hello references, nginx last."""
    names = []
    for run in results['runs'] + (results.get('latency') or []):
        if run['target'] not in names and not run.get('warmup'):
            names.append(run['target'])
    return sorted(names, key=lambda n: (n == NGINX, n.startswith('hello-')))


def number(value):
    return '–' if value is None else '{:,.0f}'.format(value)


def ms(value):
    if value is None:
        return '–'
    return '%.2f' % value if value < 10 else '%.1f' % value


def times(value):
    return '–' if value is None else '%.2f' % value


def us(value):
    return '–' if value is None else '%.1f' % value


# What a site sent (its Server header, the bodies and headers a failure
# quotes) is text in results.md: no character of it may start markdown or
# HTML (a picture, a link, code, bold, a tag) or end its line or cell.
CONTROL = re.compile(r'[\x00-\x1f\x7f-\x9f\u2028\u2029]+')
LOOKALIKE = str.maketrans({'|': '/', '`': "'", '*': '\u2217', '<': '\u2039',
                           '>': '\u203a'})


def plain(text):
    """text as one line that reads as itself in markdown and in the page."""
    text = CONTROL.sub(' ', str(text)).translate(LOOKALIKE)
    return text.replace('![', '! [').replace('](', '] (')


def row(values):
    return '| ' + ' | '.join(values) + ' |'


def table_md(headers, rows, numeric=True):
    align = '---:' if numeric else '---'
    lines = [row(headers), row(['---'] + [align] * (len(headers) - 1))]
    return lines + [row(r) for r in rows]
