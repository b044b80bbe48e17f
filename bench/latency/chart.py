"""Per page: latency (log scale) against offered load, one line per
target through its rate steps (medians of the runs), the search's probes as
dots, the budget as a dashed line; and the capacity within the budget, one
bar per target, highest first."""
import os

from ..plotting import (database_color, database_legend, fit_title, line_style,
                        plt, save, short)
from ..tables import targets
from . import budget
from ..tables import FLAG
from .cells import capacities, steps


def page_chart(results, page, path):
    cells = steps(results)
    slo = results['settings']['latency']['slo']
    figure = slo['percentile']
    names = [n for n in targets(results) if any(k[:2] == (n, page) for k in cells)]
    if not names:
        return None
    fig, ax = plt.subplots(figsize=(11, 5.4), dpi=110)
    frameworks = list(dict.fromkeys(n.split('-')[0] for n in names))
    for name in names:
        color, dash, marker = line_style(name, frameworks)
        points = sorted((c['offered']['median'], c['latency_ms'][figure]['median'])
                        for k, c in cells.items() if k[:2] == (name, page)
                        and c['latency_ms'][figure]['median'])
        if points:
            ax.plot(*zip(*points), marker=marker, linestyle=dash, color=color,
                    label=name, markersize=5, linewidth=1.2)
        probes = [(r['offered'], r['oha']['latency_ms'][figure])
                  for r in results['latency'] if r['target'] == name
                  and r['page'] == page and r['rate'] in ('probe', 'confirm')
                  and r.get('oha')
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
    ax.legend(fontsize=7, loc='upper left', bbox_to_anchor=(1.01, 1), frameon=False,
              title='colour: database; marker, dash: framework', title_fontsize=7)
    fig.tight_layout()
    fit_title(fig, ax)
    save(fig, path)
    plt.close(fig)
    return path


def capacity_chart(results, page, path):
    found = capacities(results)
    cells = sorted(((c['rate']['median'] or 0, n, c) for (n, p), c in found.items()
                    if p == page), key=lambda x: (-x[0], x[1]))
    if not cells:
        return None
    fig, ax = plt.subplots(figsize=(8.5, 1.6 + 0.32 * len(cells)), dpi=110)
    ys = range(len(cells))
    ax.barh(ys, [m for m, _, _ in cells], 0.7,
            color=[database_color(n) for _, n, _ in cells],
            xerr=[[m - (c['rate']['min'] or 0) for m, _, c in cells],
                  [(c['rate']['max'] or 0) - m for m, _, c in cells]],
            capsize=2, error_kw={'elinewidth': 1, 'ecolor': '#333333'})
    for y, (m, _, c) in zip(ys, cells):
        ax.annotate('%s%s%s' % ('≥ ' if c['open'] else '< ' if c['below']
                                else '', short(c['below'] or m),
                                ' ' + FLAG if c['noisy'] else ''),
                    ((c['rate']['max'] or m), y), xytext=(4, 0),
                    textcoords='offset points', va='center', fontsize=8)
    ax.set_yticks(list(ys))
    ax.set_yticklabels([n for _, n, _ in cells], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max((c['rate']['max'] or m) for m, _, c in cells) * 1.15 or 1)
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: short(v)))
    ax.grid(axis='x', alpha=0.3)
    ax.set_axisbelow(True)
    slo = results['settings']['latency']['slo']
    ax.set_title('%s: the highest rate with %s, requests/s, higher is better'
                 % ('GET / then a vote or a read (mix)' if page == 'mix'
                    else '/' + (page if page != 'index' else ''),
                    budget.label(slo)), fontsize=10, loc='left')
    database_legend(ax, [n for _, n, _ in cells], fontsize=8, loc='lower right')
    fig.text(0.01, 0.01, '%s; one server process and its database on one core'
             % searched([c for _, _, c in cells]),
             fontsize=7.5, color='#555555', va='bottom')
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fit_title(fig, ax, (0, 0.03, 1, 1))
    save(fig, path)
    plt.close(fig)
    return path


def searched(found):
    """How a capacity chart's bars were found, from its cells' searches
    (as results.md's capacity table says it)."""
    runs = sorted({c['rate']['runs'] for c in found})
    if runs == [1]:
        return 'one search each (no whiskers)'
    return 'median of %s searches, whiskers min-max' % '–'.join(
        str(n) for n in sorted({runs[0], runs[-1]}))


def write(results, out):
    if not results['settings'].get('latency'):
        return []
    paths = []
    for page in results['settings']['pages']:
        paths += [capacity_chart(results, page, os.path.join(
                      out, 'chart-capacity-%s.png' % page)),
                  page_chart(results, page, os.path.join(
                      out, 'chart-latency-%s.png' % page))]
    return [p for p in paths if p]
