"""PNG charts: per page, one group of bars per engine (plain and pipelined
side by side, whiskers min–max over runs) and nginx as a dashed line; with
--profile, per page a stacked bar of CPU per request by layer per engine."""
import os

from .ceilings import chart as ceiling_chart, report as ceiling_report
from .latency import chart as latency_chart
from .plotting import (FuncFormatter, database_color, database_legend, fit_title,
                       plt, save, short)
from .profile import ALL_LAYERS
from .pythons import short as minor
from .report import python_rows
from .tables import FLAG, NGINX, cells, targets
from .wrk import PATHS

COLORS = {'plain': '#3b75af', 'pipelined': '#ef8636'}
# Above this spread between the biggest and smallest value, bars would be
# flat lines on a linear axis.
LOG_SPREAD = 50


def label(name):
    """aiohttp-tarantool-one-uvloop -> three short lines ('@3.12' goes on
    the first)."""
    name, at, version = name.partition('@')
    if at:
        first, _, rest = label(name).partition('\n')
        return '%s %s\n%s' % (first, version, rest)
    parts = name.split('-')
    if parts[0] == 'hello':
        return 'hello\n%s\n%s' % (parts[1], parts[2] if len(parts) > 2 else 'asyncio')
    if len(parts) < 3:
        return name
    loop = parts[3] if len(parts) > 3 else 'asyncio'
    return '%s\n%s %s\n%s' % (parts[0], parts[1], parts[2], loop)


def page_chart(results, table, page, path):
    s = results['settings']
    modes = [m for m in s['modes'] if any(k[1:] == (page, m) for k in table)]
    engines = [n for n in targets(results) if n != NGINX
               and any((n, page, m) in table for m in modes)]
    nginx = {m: table[(NGINX, page, m)]['rps'] for m in modes
             if (NGINX, page, m) in table and table[(NGINX, page, m)]['rps']}
    if not engines and not nginx:
        return None
    fig, ax = plt.subplots(figsize=(max(7.5, 1.15 * len(engines) + 2.5), 5.6),
                           dpi=110)
    width = 0.8 / max(len(modes), 1)
    values = list(nginx.values())
    for i, mode in enumerate(modes):
        xs, heights, low, high, texts = [], [], [], [], []
        for x, name in enumerate(engines):
            c = table.get((name, page, mode))
            if not c or c['rps'] is None:
                continue
            xs.append(x + (i - (len(modes) - 1) / 2) * width)
            heights.append(c['rps'])
            low.append(c['rps'] - c['rps_min'])
            high.append(c['rps_max'] - c['rps'])
            texts.append(short(c['rps']) + (' ' + FLAG if c['flags'] else ''))
        values += [h + e for h, e in zip(heights, high)]
        shown = [n for n in engines if (table.get((n, page, mode)) or {}).get('rps')
                 is not None]
        # one mode: a bar's colour is its database's, as in every chart
        color = COLORS.get(mode) if len(modes) > 1 else [database_color(n) for n in shown]
        ax.bar(xs, heights, width * 0.92, color=color, label=mode,
               yerr=[low, high], capsize=3,
               error_kw={'elinewidth': 1, 'ecolor': '#333333'})
        # Above the whisker, so the two never cross.
        for x, top, text in zip(xs, [h + e for h, e in zip(heights, high)], texts):
            ax.annotate(text, (x, top), xytext=(0, 3), textcoords='offset points',
                        ha='center', va='bottom', fontsize=8)
    positive = [v for v in values if v > 0]
    log = bool(positive) and max(positive) / min(positive) > LOG_SPREAD
    if log:
        ax.set_yscale('log')
    for mode, value in nginx.items():
        ax.axhline(value, color=COLORS.get(mode), linestyle='--', linewidth=1.3)
        ax.annotate('nginx %s: %s req/s' % (mode, short(value)),
                    (1, value), xycoords=('axes fraction', 'data'),
                    xytext=(-4, 3), textcoords='offset points', ha='right',
                    va='bottom', fontsize=8, color=COLORS.get(mode))
    if values and not log:
        ax.set_ylim(0, max(values) * 1.18)
    ax.set_xticks(range(len(engines)))
    ax.set_xticklabels([label(n) for n in engines], fontsize=8)
    ax.set_xlim(-0.6, max(len(engines), 1) - 0.4)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: short(v)))
    ax.set_ylabel('requests per second' + (' (log scale)' if log else ''))
    ax.grid(axis='y', alpha=0.3)
    ax.set_axisbelow(True)
    what = ('POST' if page == 'vote' else 'GET') + ' ' + PATHS[page]
    if PATHS[page] != '/' + page:
        what += ' (%s)' % page
    if len(modes) == 1:
        what += ', ' + modes[0]
    ax.set_title('%s: requests per second, higher is better%s' % (
        what, ', log scale' if log else ''), fontsize=11, loc='left')
    note = ('median of %d run(s) x %d s, %d connections, whiskers min-max'
            % (s['runs'], s['duration'], s['connections']))
    if 'pipelined' in modes:
        note += '; pipelined: %d requests in flight per connection' % s['pipeline']
    missing = ['%s (%s)' % (t['name'], t['status']) for t in results['targets']
               if t['status'] != 'ok' and t['kind'] in ('engine', 'remote')]
    if missing:
        note += '\nnot shown: ' + ', '.join(missing)
    fig.text(0.01, 0.01, note, fontsize=7.5, color='#555555', va='bottom')
    if len(modes) > 1:
        ax.legend(loc='upper left', fontsize=8, frameon=False, ncol=len(modes))
    elif engines:
        database_legend(ax, engines, loc='upper left', fontsize=8, frameon=False,
                        ncol=5)
    fig.tight_layout(rect=(0, 0.06 if not missing else 0.09, 1, 1))
    fit_title(fig, ax, (0, 0.06 if not missing else 0.09, 1, 1))
    save(fig, path)
    plt.close(fig)
    return path


LAYER_COLORS = {'framework': '#3b75af', 'pages': '#ef8636',
                'templates': '#9467bd', 'driver': '#519e3e',
                'kernel': '#8c8c8c', 'database': '#c53a32'}


def profile_chart(results, page, path):
    records = [p for p in results.get('profiles') or []
               if p['page'] == page and p['us_per_request']]
    if not records:
        return None
    fig, ax = plt.subplots(figsize=(max(7.5, 1.15 * len(records) + 2.5), 5.6),
                           dpi=110)
    xs = range(len(records))
    bottoms = [0.0] * len(records)
    for layer in ALL_LAYERS:
        heights = [p['us_per_request'].get(layer) or 0.0 for p in records]
        ax.bar(xs, heights, 0.6, bottom=bottoms, label=layer,
               color=LAYER_COLORS[layer])
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    for x, top in zip(xs, bottoms):
        ax.annotate('%.0f µs' % top, (x, top), xytext=(0, 3),
                    textcoords='offset points', ha='center', va='bottom',
                    fontsize=8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([label(p['target']) for p in records], fontsize=8)
    ax.set_ylim(0, max(bottoms) * 1.25 or 1)
    ax.set_ylabel('CPU µs per request')
    ax.grid(axis='y', alpha=0.3)
    ax.set_axisbelow(True)
    ax.set_title('%s %s: where the CPU time of a request goes, lower is better'
                 % ('POST' if page == 'vote' else 'GET', PATHS[page]),
                 fontsize=11, loc='left')
    ax.legend(loc='upper left', fontsize=8, frameon=False, ncol=len(ALL_LAYERS))
    fig.text(0.01, 0.01, 'one profiled %d s run per engine (%s), py-spy shares '
             'scaled to /proc CPU time; database: its server process'
             % (results['settings']['duration'], records[0]['mode']),
             fontsize=7.5, color='#555555', va='bottom')
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fit_title(fig, ax, (0, 0.06, 1, 1))
    save(fig, path)
    plt.close(fig)
    return path


PYTHON_COLORS = ('#3b75af', '#ef8636', '#519e3e', '#c53a32', '#8d69b8',
                 '#84584e')


def python_chart(results, table, page, path):
    """One group of bars per engine, one bar per interpreter, for the first
    mode the page ran in."""
    modes = [m for m in results['settings']['modes']
             if any(k[1:] == (page, m) for k in table)]
    if not results['settings'].get('several_pythons') or not modes:
        return None
    versions, rows = python_rows(results, table, page, modes[0])
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(max(7.5, 0.9 * len(rows) * len(versions)
                                        / 2 + 2.5), 5.6), dpi=110)
    width = 0.8 / len(versions)
    for i, version in enumerate(versions):
        xs, heights = [], []
        for x, (_, by) in enumerate(rows):
            if version in by:
                xs.append(x + (i - (len(versions) - 1) / 2) * width)
                heights.append(by[version]['rps'])
        ax.bar(xs, heights, width * 0.92, label='Python ' + minor(version),
               color=PYTHON_COLORS[i % len(PYTHON_COLORS)])
        for x, h in zip(xs, heights):
            ax.annotate(short(h), (x, h), xytext=(0, 3), fontsize=7,
                        textcoords='offset points', ha='center', va='bottom')
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([label(name) for name, _ in rows], fontsize=8)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: short(v)))
    ax.set_ylabel('requests per second')
    ax.set_ylim(0, max(c['rps'] for _, by in rows for c in by.values()) * 1.18)
    ax.grid(axis='y', alpha=0.3)
    ax.set_axisbelow(True)
    ax.set_title('%s %s, %s: requests per second by interpreter, higher is '
                 'better' % ('POST' if page == 'vote' else 'GET', PATHS[page],
                             modes[0]), fontsize=11, loc='left')
    ax.legend(loc='upper left', fontsize=8, frameon=False, ncol=len(versions))
    fig.text(0.01, 0.01, 'median of %d run(s) x %d s; the runs of an engine on '
             'every interpreter took turns' % (results['settings']['runs'],
                                               results['settings']['duration']),
             fontsize=7.5, color='#555555', va='bottom')
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fit_title(fig, ax, (0, 0.06, 1, 1))
    save(fig, path)
    plt.close(fig)
    return path


def write(results, out):
    table = cells(results)
    paths = []
    for page in results['settings']['pages']:
        path = profile_chart(results, page,
                             os.path.join(out, 'chart-profile-%s.png' % page))
        if path:
            paths.append(path)
    for page in results['settings']['pages']:
        path = page_chart(results, table, page,
                          os.path.join(out, 'chart-%s.png' % page))
        if path:
            paths.append(path)
        path = python_chart(results, table, page,
                            os.path.join(out, 'chart-pythons-%s.png' % page))
        if path:
            paths.append(path)
    if ceiling_report.record(results):
        paths += [p for p in [ceiling_chart.write(results, out)] if p]
    return paths + latency_chart.write(results, out)
