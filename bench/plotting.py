"""matplotlib, drawing to files only, and the short numbers of the charts."""
import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

__all__ = ['FuncFormatter', 'plt', 'short']


def short(value):
    if value >= 10000:
        return '%.0fk' % (value / 1000)
    if value >= 1000:
        return '%.1fk' % (value / 1000)
    return '%.0f' % value
