"""matplotlib, drawing to files only, and the short numbers of the charts."""
import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from .colors import DATABASES  # noqa: E402

__all__ = ['FuncFormatter', 'plt', 'save', 'short']


def save(fig, path):
    """fig as a PNG of at most 256 colours (a chart's flat colours and
    anti-aliased text need no more): a third of the size or less, so that
    results.html, which holds its charts itself, stays small."""
    import io
    from PIL import Image
    buffer = io.BytesIO()
    fig.savefig(buffer, format='png')
    buffer.seek(0)
    with Image.open(buffer) as picture:
        picture.convert('RGB').quantize(256).save(path, optimize=True)


def short(value):
    if value >= 10000:
        return '%.0fk' % (value / 1000)
    if value >= 1000:
        return '%.1fk' % (value / 1000)
    return '%.0f' % value


def fit_title(fig, ax, rect=(0, 0, 1, 1)):
    """Wrap ax's title until it lies within the figure (a title placed at
    the axes, right of the labels, runs past the edge otherwise), laying
    the figure out again each time."""
    import textwrap
    title = ax.title if ax.get_title() else ax._left_title
    for _ in range(4):
        fig.canvas.draw()
        box = title.get_window_extent(fig.canvas.get_renderer())
        room = fig.bbox.width - max(box.x0, 0) - 4
        if box.x0 >= 0 and box.x1 <= fig.bbox.width - 2:
            return
        text = title.get_text().replace('\n', ' ')
        head, colon, rest = text.partition(': ')
        if colon and '\n' not in title.get_text():    # first at its colon
            title.set_text(head + ':\n' + rest)
        else:
            width = max(20, int(len(text) * room / max(box.width, 1)) - 2)
            title.set_text(textwrap.fill(text, width))
        fig.tight_layout(rect=rect)


DATABASE_COLORS = DATABASES
MARKERS = 'os^vDPX*<>hpd8'
LINES = ['-', '--', '-.', ':']


def database_color(name):
    from .latency.demand import database_of
    return DATABASE_COLORS.get(database_of(name), DATABASE_COLORS[None])


def database_legend(ax, names, **options):
    """A legend of the databases among names' colours."""
    from matplotlib.patches import Patch
    from .latency.demand import database_of
    kinds = list(dict.fromkeys(database_of(n) for n in names))
    ax.legend(handles=[Patch(color=DATABASE_COLORS.get(k, DATABASE_COLORS[None]),
                             label=k or 'no database') for k in kinds], **options)


def line_style(name, frameworks):
    """(colour, line style, marker) of an engine's line: its database's
    colour, a marker and a dash of its framework's (frameworks: the
    chart's, in order)."""
    framework = name.partition('@')[0].split('-')[0]
    i = frameworks.index(framework) if framework in frameworks else 0
    return database_color(name), LINES[i % len(LINES)], MARKERS[i % len(MARKERS)]
