"""matplotlib, drawing to files only, and the short numbers of the charts."""
import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

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
