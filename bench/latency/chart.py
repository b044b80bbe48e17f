"""Per page: latency (log scale) against offered load, one line per
target through its rate steps (medians of the runs), the search's probes as
dots, the budget as a dashed line."""
import os

from ..plotting import plt, short
from ..tables import targets
from . import budget
from .cells import steps


def page_chart(results, page, path):
    cells = steps(results)
    slo = results['settings']['latency']['slo']
    figure = slo['percentile']
    names = [n for n in targets(results) if any(k[:2] == (n, page) for k in cells)]
    if not names:
        return None
    fig, ax = plt.subplots(figsize=(8.5, 5.4), dpi=110)
    for i, name in enumerate(names):
        color = plt.cm.tab10(i % 10)
        points = sorted((c['offered']['median'], c['latency_ms'][figure]['median'])
                        for k, c in cells.items() if k[:2] == (name, page)
                        and c['latency_ms'][figure]['median'])
        if points:
            ax.plot(*zip(*points), marker='o', color=color, label=name)
        probes = [(r['offered'], r['oha']['latency_ms'][figure])
                  for r in results['latency'] if r['target'] == name
                  and r['page'] == page and r['rate'] == 'probe' and r.get('oha')
                  and r['oha']['latency_ms'].get(figure)]
        if probes:
            ax.scatter(*zip(*probes), s=14, color=color, alpha=0.5)
    ax.axhline(slo['ms'], color='#c44', linestyle='--', linewidth=1)
    ax.text(ax.get_xlim()[0], slo['ms'], ' budget %s' % budget.label(slo),
            color='#c44', va='bottom', fontsize=8)
    ax.set_yscale('log')
    lat = results['settings']['latency']
    generator = (lat.get('mix') or lat)['generator'] if page == 'mix' else lat['generator']
    ax.set_xlabel('offered requests/s (%s)' % generator)
    ax.set_ylabel('%s latency, ms (log)' % figure)
    ax.set_title('/%s: %s latency against offered load' % (
        page if page != 'index' else '', figure))
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: short(v)))
    ax.grid(True, which='both', alpha=0.25)
    ax.legend(fontsize=7, loc='upper left', frameon=False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write(results, out):
    if not results['settings'].get('latency'):
        return []
    paths = [page_chart(results, page, os.path.join(out, 'chart-latency-%s.png' % page))
             for page in results['settings']['pages']]
    return [p for p in paths if p]
