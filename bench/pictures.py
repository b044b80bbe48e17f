"""A chart embedded in a page: results.html holds its pictures itself."""
import base64
import html
import os
import re

# Only what the bench drew: a chart-*.png in the results folder itself. A
# name in results.md may have come from elsewhere (a site's Server header),
# and the page must not carry a file it names beyond the charts.
CHART = re.compile(r'chart-[\w.-]+\.png')


def chart_path(name, folder):
    """The file of a chart the bench wrote, or None."""
    real = os.path.realpath(os.path.join(folder, name))
    if (os.path.dirname(real) != os.path.realpath(folder)
            or not CHART.fullmatch(os.path.basename(real))):
        return None
    return real


def image(alt, name, folder):
    """An <img> holding the chart, or its alt text; alt and name as text."""
    path = chart_path(name, folder)
    try:
        with open(path or '', 'rb') as f:
            data = base64.b64encode(f.read()).decode('ascii')
    except OSError:
        return '<i>(%s: no chart)</i>' % html.escape(alt)
    return '<img alt="%s" src="data:image/png;base64,%s">' % (html.escape(alt), data)
