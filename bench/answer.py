"""The opening of results.html for a latency run: a form that ranks the
stacks for the reader's own rate, p99 budget and database in the page
(bench/ranking.js on the data advise.embedded() gives it; the values kept
in the page's address), then the workload's capacity chart, the top
stacks and one site sized for an example rate by bench.py advise."""
import html
import json
import os

from . import advise
from .pictures import image
from .latency import budget
from .latency.cells import capacities

EXAMPLE = 20000     # requests/s of the sizing the page opens with
TOP = 5
HERE = os.path.dirname(os.path.abspath(__file__))


def esc(text):
    return html.escape(str(text), quote=True)


def rows_html(rows):
    out = ['<div class="scroll"><table><tr>%s</tr>' % ''.join(
        '<th>%s</th>' % esc(c) for c in advise.COLUMNS)]
    for r in rows:
        out.append('<tr>%s</tr>' % ''.join(
            '<td class="%s">%s</td>' % ('n' if i in advise.NUMERIC else '', esc(c))
            for i, c in enumerate(advise.cells(r))))
    return out + ['</table></div>']


def section(results, folder):
    """HTML lines, or [] when the run has no latency figures."""
    try:
        data = advise.embedded(results)
    except (advise.Refused, IndexError, KeyError, TypeError, ValueError):
        return []
    page, slo = data['page'], data['slo']
    found = sorted(((c['rate']['median'] or 0, n) for (n, p), c in
                    capacities(results).items()
                    if p == page and n in advise.engines(results)), reverse=True)
    with open(os.path.join(HERE, 'ranking.js')) as f:
        script = f.read()
    blob = json.dumps(data, separators=(',', ':')).replace('</', '<\\/')
    kinds = sorted({e['database'] for e in data['engines'] if e['database']})
    head = ('<tr><th>engine</th><th>cores</th><th>basis</th><th>database</th>'
            '<th>first limit</th><th>monthly $</th><th>memory</th><th>notes</th></tr>')
    out = ['<h2>Which stack, and how many cores</h2>',
           '<form id="advise" onsubmit="return false">'
           '<label>requests/s of %s <input id="advise-rate" type="number" min="1" '
           'value="%d"></label><label>p99 budget, ms <input id="advise-budget" '
           'type="number" min="0.01" step="any" value="%g"></label>'
           '<label>database <select id="advise-db"><option value="">any</option>%s'
           '</select></label></form>'
           % (esc(page), EXAMPLE, slo['ms'] if slo['percentile'] == 'p99' else 10,
              ''.join('<option value="%s">%s</option>' % (esc(k), esc(k)) for k in kinds)),
           '<p>The ranking of <code>bench.py advise RESULTS --rate N --slo p99=Bms'
           ' [--database D]</code> for this run, computed in this page from the '
           'figures it holds (another budget is read from the fixed-rate points); '
           'the address keeps what you typed (<code>?rate=5000&amp;p99=10&amp;'
           'db=postgres</code>). Measured: the run served the rate on one core; '
           'modelled: sized past it from the CPU per request.</p>',
           '<p id="advise-said"></p>',
           '<div class="scroll"><table><thead>%s</thead><tbody id="advise-out">'
           '</tbody></table></div>' % head,
           '<details id="advise-refused"><summary id="advise-refused-said">'
           '</summary><div class="scroll"><table><thead>%s</thead>'
           '<tbody id="advise-refused-out"></tbody></table></div></details>' % head,
           '<script type="application/json" id="advise-data">%s</script>' % blob,
           '<script>%s</script>' % script,
           '<p>%s</p>' % image('capacity %s' % page, 'chart-capacity-%s.png' % page,
                               folder),
           '<h3>Top stacks: %s within %s on one core</h3>' % (
               esc(page), esc(budget.label(slo))), '<ol>']
    out += ['<li>%s: %s requests/s</li>' % (esc(n), '{:,.0f}'.format(rate))
            for rate, n in found[:TOP]]
    out += ['</ol>', '<h3>One site for %s requests/s of %s (bench.py advise)</h3>'
            % ('{:,.0f}'.format(EXAMPLE), esc(page))]
    try:
        header, rows = advise.advise(results, EXAMPLE, None, page)
        out += ['<p>%s</p>' % esc(line) for line in header[3:]] + rows_html(rows)
    except (advise.Refused, KeyError, TypeError, ValueError, OverflowError,
            ZeroDivisionError) as e:
        out.append('<p>%s</p>' % esc(e))
    return out
