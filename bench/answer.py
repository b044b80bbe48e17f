"""The opening of results.html for a latency run: a form with advise's
options (rate, budget and its percentile, database, framework, headroom,
price), kept in the page's address; the ranking advise gives for them,
computed in the page (bench/ranking.js on what advise.embedded() gives
it) as its compact table, refused rows folded, numbered notes; then the
workload's charts, the top stacks and advise's text for an example rate."""
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


def options(values, chosen=None, first=None):
    out = ['<option value="">%s</option>' % esc(first)] if first else []
    return ''.join(out + ['<option value="%s"%s>%s</option>' % (
        esc(v), ' selected' if v == chosen else '', esc(v)) for v in values])


def form(data):
    """The reader's question: advise's options, each a field."""
    page, slo = data['page'], data['slo']
    kinds = sorted({e['database'] for e in data['engines'] if e['database']})
    frameworks = sorted({e['framework'] for e in data['engines']})
    field = '<label>%s %s</label>'
    return ('<form id="advise" onsubmit="return false">' + ''.join([
        field % ('requests/s of %s' % esc(page), '<input id="advise-rate" type="number" '
                 'min="1" step="any" inputmode="decimal" value="%d">' % EXAMPLE),
        field % ('latency budget, ms', '<input id="advise-budget" type="number" '
                 'min="0.001" step="any" inputmode="decimal" value="%g">' % slo['ms']),
        field % ('percentile', '<select id="advise-pct">%s</select>' % options(
            data['percentiles'], slo['percentile'])),
        field % ('database', '<select id="advise-db">%s</select>' % options(kinds, None, 'any')),
        field % ('framework', '<select id="advise-fw">%s</select>' % options(
            frameworks, None, 'any')),
        field % ('headroom', '<input id="advise-headroom" type="number" min="0.05" '
                 'max="1" step="0.05" inputmode="decimal" value="%g">' % data['headroom']),
        field % ('$ per core-month', '<input id="advise-price" type="number" min="0.01" '
                 'step="any" inputmode="decimal" value="%.2f">' % (
                     data['price'] * data['hours']))]) + '</form>')


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
    head = '<tr>%s</tr>' % ''.join('<th>%s</th>' % c for c in advise.TABLE)
    out = ['<h2>Which stack, and how many cores</h2>', form(data),
           '<p id="advise-said" role="status"></p><ul id="advise-warn"></ul>',
           '<div class="scroll"><table class="answer"><thead>%s</thead>'
           '<tbody id="advise-out"></tbody></table></div>' % head,
           '<details id="advise-refused"><summary id="advise-refused-said">'
           '</summary><div class="scroll"><table class="answer"><thead>%s</thead>'
           '<tbody id="advise-refused-out"></tbody></table></div></details>' % head,
           '<ol id="advise-notes" class="notes"></ol>',
           '<p>The same as <code id="advise-command"></code>, computed in this page '
           'from the figures it holds (nothing fetched); the address keeps the '
           'form (<code>?rate=5000&amp;p99=10&amp;pct=p99&amp;db=postgres&amp;'
           'fw=aiohttp&amp;headroom=0.8&amp;price=29.20</code>; p99 is the budget in '
           'ms, pct its percentile). Measured: the run served the rate on one core; '
           'modelled: sized past it from the CPU per request at the capacity found. '
           'Another budget than the run\'s is read from the fixed-rate points. '
           '$/M requests: the site\'s whole cores at the rate asked (the cost '
           'table below: one core at its capacity).</p>',
           '<script type="application/json" id="advise-data">%s</script>' % blob,
           '<script>%s</script>' % script,
           '<p>%s</p>' % image('capacity %s' % page, 'chart-capacity-%s.png' % page,
                               folder),
           '<p>%s</p>' % image('latency %s' % page, 'chart-latency-%s.png' % page,
                               folder),
           '<h3>Top stacks: %s within %s on one core</h3>' % (
               esc(page), esc(budget.label(slo))), '<ol>']
    out += ['<li>%s: %s requests/s</li>' % (esc(n), '{:,.0f}'.format(rate))
            for rate, n in found[:TOP]]
    out += ['</ol>', '<details><summary>One site for %s requests/s of %s, as '
            'bench.py advise prints it (without JavaScript)</summary>'
            % ('{:,.0f}'.format(EXAMPLE), esc(page))]
    try:
        header, rows = advise.advise(results, EXAMPLE, None, page)
        out.append('<pre>%s</pre>' % esc(advise.text(header, rows)))
    except (advise.Refused, KeyError, TypeError, ValueError, OverflowError,
            ZeroDivisionError) as e:
        out.append('<p>%s</p>' % esc(e))
    return out + ['</details>']
