"""A chart embedded in a page: results.html holds its pictures itself."""
import base64
import html
import os


def image(alt, name, folder):
    path = os.path.join(folder, html.unescape(name))
    try:
        with open(path, 'rb') as f:
            data = base64.b64encode(f.read()).decode('ascii')
    except OSError:
        return '<i>(%s: no chart)</i>' % alt
    return '<img alt="%s" src="data:image/png;base64,%s">' % (alt, data)
