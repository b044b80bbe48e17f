"""chart-ceilings.png: per database, each call's rate at each layer (log
scale: inside the database is orders of magnitude above HTTP)."""
import os

from ..plotting import plt, save, short
from . import CALLS
from .report import HEADERS, record, runs
from .run import DATABASES, LAYERS

COLORS = {'database': '#c53a32', 'asynctnt': '#519e3e',
          'aiotarantool': '#8fbf5a', 'asyncpg': '#2f7d6d',
          'http-async': '#3b75af', 'http-sync': '#ef8636'}


def write(results, out):
    found = runs(results)
    databases = [d for d in DATABASES if any(k[0] == d for k in found)]
    if not databases:
        return None
    fig, axes = plt.subplots(1, len(databases), squeeze=False, dpi=110,
                             figsize=(6.5 * len(databases), 5.6))
    for ax, database in zip(axes[0], databases):
        layers = [x for x in LAYERS if any(k[:2] == (database, x)
                                           for k in found)]
        width = 0.8 / max(len(layers), 1)
        for i, layer in enumerate(layers):
            xs, heights = [], []
            for x, call in enumerate(CALLS):
                r = found.get((database, layer, call))
                if r and r['rate']:
                    xs.append(x + (i - (len(layers) - 1) / 2) * width)
                    heights.append(r['rate'])
            ax.bar(xs, heights, width * 0.92, color=COLORS[layer],
                   label=HEADERS[layer])
            for x, h in zip(xs, heights):
                ax.annotate(short(h), (x, h), xytext=(0, 2),
                            textcoords='offset points', ha='center',
                            va='bottom', fontsize=6.5, rotation=90)
        ax.set_yscale('log')
        top = max((r['rate'] for k, r in found.items()
                   if k[0] == database and r['rate']), default=1)
        ax.set_ylim(top=top * 6)    # room for the labels and the legend
        ax.set_xticks(range(len(CALLS)))
        ax.set_xticklabels(CALLS, fontsize=9)
        ax.set_title('%s: calls per second by layer, log scale' % database,
                     fontsize=11, loc='left')
        ax.set_ylabel('calls per second (log scale)')
        ax.grid(axis='y', alpha=0.3)
        ax.set_axisbelow(True)
        ax.legend(loc='upper center', fontsize=7.5, frameon=False, ncol=3)
    measured = record(results)
    fig.text(0.01, 0.01, 'one %d s run per call and layer; vote: a vote and '
             'the next pair; visits: %d per call' % (
                 measured['seconds'], measured.get('visit_batch', 100)),
             fontsize=7.5, color='#555555', va='bottom')
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    path = os.path.join(out, 'chart-ceilings.png')
    save(fig, path)
    plt.close(fig)
    return path
