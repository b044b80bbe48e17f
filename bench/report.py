"""results.md: per page and mode, one row per engine with medians over the
timed runs, flagged runs marked, and the ratios that make runs comparable."""
import os

from runtime import engines
from runtime.databases import table as databases
from . import cost, headline, instructions, orm_price
from .ceilings import report as ceiling_report
from .latency import report as latency
from .memory import section as memory_section
from .nginx import NGINX_PAGES
from .references import of_engine
from .profile import PYTHON_LAYERS
from .pythons import short
from .stats import ratio
from .storage import on_memtx, replicas_of, storage_of, without_replicas
from .tables import (FLAG, NGINX, cells, ms, number, plain, table_md, targets,
                     times, us)

ELSEWHERE = '†'     # marks the row of a site the bench did not start


def counterpart(name):
    """The engine on the reference database (Tarantool) another database's
    engine is compared with: same framework, loop and connection mode (or
    the first of framework+loop)."""
    name, at, version = name.partition('@')     # on the same interpreter
    engine = engines.BY_NAME.get(name)
    if engine is None or databases.of(engine) is databases.REFERENCE:
        return None
    same = [e for e in engines.ENGINES if databases.of(e) is databases.REFERENCE
            and (e.framework, e.loop) == (engine.framework, engine.loop)]
    exact = [e for e in same if e.mode == engine.mode]
    found = (exact or same)[:1]
    return found[0].name + at + version if found else None


def reference_rps(table, name, page, mode):
    """req/s of a PostgreSQL or Redis engine's counterpart (on memtx, when
    the run had both storage engines), or None."""
    other = counterpart(name)
    if other is None:
        return None
    plain, at, version = other.partition('@')
    for candidate in (other, plain + ' (memtx)' + at + version):
        found = (table.get((candidate, page, mode)) or {}).get('rps')
        if found:
            return found
    return None


def ratios(table, name, page, mode):
    """Ratio columns of one row; None where they do not apply."""
    rps = lambda n, p, m: (table.get((n, p, m)) or {}).get('rps')  # noqa: E731
    mine = rps(name, page, mode)
    bare = of_engine(name) if page == 'ugly' else None
    # Against the reference's runs that took turns with this engine's.
    paired = (table.get((bare, page, mode, name)) or {}).get('rps')
    return {
        'nginx': (ratio(mine, rps(NGINX, page, mode))
                  if page in NGINX_PAGES and name != NGINX else None),
        'hello': ratio(mine, paired or rps(bare, page, mode)) if bare else None,
        'ugly': ratio(mine, rps(name, 'ugly', mode)) if page != 'ugly' else None,
        'reference': ratio(mine, reference_rps(table, name, page, mode)),
        'pipelined': ratio(mine, rps(name, page, 'plain'))
        if mode == 'pipelined' else None,
        'vinyl': ratio(mine, rps(on_memtx(name), page, mode))
        if storage_of(name) == 'vinyl' else None,
        'replicas': ratio(mine, rps(without_replicas(name), page, mode))
        if replicas_of(name) else None,
    }


RATIO_HEADERS = (('nginx', '÷ nginx'), ('hello', '÷ bare hello'),
                 ('ugly', '÷ own ugly'),
                 ('reference', '÷ same on %s' % databases.REFERENCE.name),
                 ('pipelined', 'pipelined ÷ plain'),
                 ('vinyl', 'vinyl ÷ memtx'),
                 ('replicas', 'replicas ÷ none'))


def page_table(table, names, page, mode, ceilings=None, marks=None):
    """Markdown lines of one page and mode, then its flag notes; ceilings:
    {engine: the rate of its page's call through its driver alone}; marks:
    {name: what follows it in its row}."""
    ceilings = ceilings or {}
    present = [n for n in names if (n, page, mode) in table]
    computed = {n: ratios(table, n, page, mode) for n in present}
    shown = [(k, h) for k, h in RATIO_HEADERS
             if any(computed[n][k] is not None for n in present)]
    headers = ['engine', 'req/s median (min–max)', 'p50 ms', 'p99 ms',
               'errors'] + [h for _, h in shown]
    checked = any(table[(n, page, mode)]['votes_checked'] for n in present)
    if checked:
        headers.append('vote totals add up')
    shared = any(n in ceilings for n in present)
    if shared:
        headers.append('share of the ceiling')
    rows, notes = [], []
    for name in present:
        c = table[(name, page, mode)]
        errors = number(c['errors']) + (' ' + FLAG if c['flags'] else '')
        rows.append([marked(name, marks), '%s (%s–%s)' % (
                         number(c['rps']), number(c['rps_min']),
                         number(c['rps_max'])),
                     ms(c['p50']), ms(c['p99']), errors]
                    + [times(computed[name][k]) for k, _ in shown]
                    + (['%d/%d runs' % (c['votes_ok'], c['votes_checked'])]
                       if checked else [])
                    + ([times(ratio(c['rps'], ceilings.get(name)))]
                       if shared else []))
        notes.extend('%s %s %s' % (FLAG, name, plain(f)) for f in c['flags'])
    lines = table_md(headers, rows)
    if notes:
        lines += [''] + ['- ' + n for n in notes]
    return lines


def marked(name, marks):
    return name + marks[name] if marks and name in marks else name


def overview(table, names, pages, mode, marks=None):
    pages = [p for p in pages if any(k[1:] == (p, mode) for k in table)]
    present = [n for n in names if any((n, p, mode) in table for p in pages)]
    rows = [[marked(n, marks)] + [number((table.get((n, p, mode)) or {}).get('rps'))
                                   for p in pages] for n in present]
    return table_md(['engine'] + list(pages), rows)


def ratio_overview(table, names, pages, mode, marks=None):
    """The ratios people ask first: engine ÷ nginx and page ÷ own ugly."""
    columns = [('ugly', 'nginx', 'ugly ÷ nginx'),
               ('ugly', 'hello', 'ugly ÷ bare hello'),
               ('about', 'nginx', 'about ÷ nginx')]
    columns += [(p, 'ugly', '%s ÷ ugly' % p) for p in pages if p != 'ugly']
    columns = [c for c in columns if c[0] in pages]
    found = {n: [ratios(table, n, page, mode)[kind] for page, kind, _ in columns]
             for n in names if n != NGINX}
    keep = [i for i in range(len(columns))
            if any(v[i] is not None for v in found.values())]
    rows = [[marked(n, marks)] + [times(v[i]) for i in keep]
            for n, v in found.items()
            if any(v[i] is not None for i in keep)]
    headers = ['engine'] + [columns[i][2] for i in keep]
    return table_md(headers, rows) if rows else []


def python_rows(results, table, page, mode):
    """(versions, [(engine or reference, {version: cell}) …]) of a run on
    several interpreters: each name's cells by interpreter."""
    versions = results['settings'].get('pythons') or []
    rows = {}
    for name in targets(results):
        base, _, version = name.partition('@')
        cell = table.get((name, page, mode))
        if base != NGINX and cell and cell['rps']:
            rows.setdefault(base, {})[next(
                v for v in versions if short(v) == version)] = cell
    return versions, list(rows.items())


def python_tables(results, table, pages, modes):
    """Per page and mode, engine × interpreter, when there were several."""
    if not results['settings'].get('several_pythons'):
        return []
    lines = ['', '## Interpreters', '',
             'Median requests/s of each engine and bare hello on each '
             'interpreter; the runs of one engine on all of them took '
             'turns; "3.x ÷ %s" is the ratio to the first interpreter given. '
             'Legacy engines (japronto, aiotarantool) run on 3.7 only.'
             % short(results['settings']['pythons'][0])]
    for page in pages:
        for mode in modes:
            versions, rows = python_rows(results, table, page, mode)
            if not rows:
                continue
            first = versions[0]
            rps = lambda by, v: by.get(v, {}).get('rps')  # noqa: E731
            compared = [v for v in versions[1:]
                        if any(rps(by, v) and rps(by, first) for _, by in rows)]
            lines += ['', '### %s · %s' % (page, mode), '',
                      '![%s by interpreter](chart-pythons-%s.png)' % (page, page), '']
            headers = (['engine'] + ['Python %s' % short(v) for v in versions]
                       + ['%s ÷ %s' % (short(v), short(first)) for v in compared])
            lines += table_md(headers, [
                [name] + [number(rps(by, v)) for v in versions]
                + [times(ratio(rps(by, v), rps(by, first))) for v in compared]
                for name, by in rows])
    return lines


def memory(text):
    """'24683656 kB' -> '23.5 GiB'."""
    try:
        return '%.1f GiB' % (int(text.split()[0]) / 1024 ** 2)
    except (AttributeError, ValueError, IndexError):
        return text


def header(results):
    s, m, v = results['settings'], results['machine'], results['versions']
    pin = results['pinning']
    packages = ', '.join('%s %s' % kv for kv in v['packages'].items() if kv[1])
    wrk = v.get('wrk') and ' '.join(v['wrk'].split()[:2])
    tools = '; '.join(x for x in [wrk, v.get('nginx')] + [
        v.get(db.name) for db in databases.TABLE] if x)
    source = results.get('source', {})
    lines = [
        '# Benchmark results', '',
        '- Run: %s to %s, commit %s%s' % (
            results['started'], results.get('finished', '(unfinished)'),
            (source.get('commit') or '?')[:12],
            ' (with local changes)' if source.get('modified') else ''),
        '- Machine: %s, %s cores, %s memory; %s (Debian %s), kernel %s' % (
            m['cpu'], m['cores'], memory(m['memory']), m['os'], m['debian_version'],
            m['kernel'].split()[0]),
        '- Python %s; %s' % (', '.join(s.get('pythons') or [v['python']]),
                             packages),
        '- Tools: %s' % tools,
        '- Load: wrk with %d thread(s) and %d connections; %d timed run(s) of '
        '%d s after %d s of warmup per page and mode; pipelined runs keep %d '
        'requests in flight per connection; wrk timeout %d s' % (
            s['wrk_threads'], s['connections'], s['runs'], s['duration'],
            s['warmup'], s['pipeline'], s['wrk_timeout']),
    ] + parts_line(results) + (
        [latency.header_line(results)] if s.get('latency') else []) + [
        '- Processes: %d per engine (server.py --workers) and for nginx; '
        'the hello references run one, started for each engine: its ugly '
        'runs take turns with the engine\'s, and "÷ bare hello" compares '
        'those turns' % s.get('workers', 1),
        '- Pinning: %s' % ('server on `%s` (%s), wrk on `%s`%s' % (
            pin['server'], pin['server_covers'], pin['wrk'],
            ', the databases on `%s`' % pin['databases']
            if pin.get('databases') else '')
            if pin['server'] else 'none (fewer than two usable cores)'),
    ] + remote_line(results) + [
        '',
        'Medians over the timed runs. %s marks a run with more than 1%% '
        'non-2xx answers or socket errors, or a vote count that did not add '
        'up; its numbers are kept. How to read the ratios: docs/benchmark.md.'
        % FLAG,
    ]
    if results.get('interrupted'):
        lines[-1:-1] = ['**Interrupted: only part of the matrix ran.**', '']
    return lines


def parts_line(results):
    """The parts a merged run was made of (bench.py merge), or []."""
    parts = results.get('parts')
    if not parts:
        return []
    return ['- Parts (bench.py merge; the hello references and nginx pooled '
            'over the parts that ran them): %s' % '; '.join(
                '%d. %s to %s, commit %s, %d engines' % (
                    i + 1, p['started'], p.get('finished') or '?',
                    ((p.get('source') or {}).get('commit') or '?')[:12],
                    len(p['engines'])) for i, p in enumerate(parts))]


def status_table(results):
    rows = []
    for t in results['targets']:
        detail = t.get('reason') or t.get('note') or ''
        if t['status'] == 'ok' and t.get('verification'):
            detail = 'verified: ' + ', '.join(c['check'] for c in t['verification'])
        if t['kind'] == 'remote':
            detail = '%s, not started by the bench%s; %s' % (
                t['url'], '' if not t.get('server_header') else
                ' (Server: %s)' % t['server_header'], detail)
            if t.get('note') and t['note'] not in detail:
                detail += '; ' + t['note']
        rows.append([marked(t['name'], remote_marks(results)), t['status'],
                     plain(detail)])
    return table_md(['engine', 'status', 'details'], rows, numeric=False)


def remote_marks(results):
    """{name: mark} of the --target sites."""
    return {t['name']: ' ' + ELSEWHERE for t in results['targets']
            if t['kind'] == 'remote'}


def remote_line(results):
    """The header line on the --target sites, or []."""
    sites = [t for t in results['targets'] if t['kind'] == 'remote']
    if not sites:
        return []
    return ['- %s Not started by the bench (--target): %s. Verified and '
            'loaded from the machine above, over the network between them; '
            'their processes are not pinned, profiled or paired with a bare '
            'hello, and neither their CPU nor their database\'s is measured' % (
                ELSEWHERE, '; '.join('%s at %s%s' % (
                    t['name'], plain(t['url']), ', Server: %s' % plain(
                        t['server_header']) if t.get('server_header') else '')
                    for t in sites))]


def profile_tables(results):
    """"Where the time goes": per page, µs of CPU per request by layer."""
    records = results.get('profiles') or []
    if not records:
        return []
    lines = ['', '## Where the time goes', '',
             'CPU time per request (µs) by layer, from one extra run per '
             'engine and page under py-spy (%s samples/s), separate from the '
             'timed runs. The Python layers share the server\'s user time by '
             'their samples; kernel is its system time; database is the '
             'database server\'s CPU. How to read it: docs/benchmark.md.'
             % records[0]['py_spy']['rate']]
    headers = (['engine', 'mode', 'requests', 'samples'] + list(PYTHON_LAYERS)
               + ['kernel', 'server total', 'database', 'total'])
    for page in results['settings']['pages']:
        rows = []
        for p in records:
            if p['page'] != page:
                continue
            f = p['us_per_request'] or {}
            total = (None if f.get('server') is None else
                     f['server'] + (f.get('database') or 0))
            rows.append([p['target'], p['mode'], number(p['requests']),
                         number(sum(p['samples'].values()))]
                        + [us(f.get(k)) for k in PYTHON_LAYERS + (
                            'kernel', 'server', 'database')] + [us(total)])
        if rows:
            lines += ['', '### %s' % page, '',
                      '![profile %s](chart-profile-%s.png)' % (page, page), '']
            lines += table_md(headers, rows)
    notes = [profile_note(p) for p in records]
    notes = ['- %s %s %s: %s' % (FLAG, p['target'], p['page'], n)
             for p, n in zip(records, notes) if n]
    return lines + ([''] + notes if notes else [])


def profile_note(p):
    """Why a profile row lacks figures, or None."""
    if not p['requests']:
        return 'no request completed'
    if not sum(p['samples'].values()):
        return 'py-spy took no samples (exit %s): %s' % (
            p['py_spy']['exit_code'], plain(p['py_spy']['log']))
    if p['database_cpu'] is None:
        return 'database process not found (not local?): no database figure'
    return None


def instruction_report(results):
    """results.md of a bench.py --instructions run."""
    source, v = results.get('source', {}), results.get('versions', {})
    lines = ['# Benchmark results: instructions', '',
             '- Run: %s to %s, commit %s%s' % (
                 results['started'], results.get('finished', '(unfinished)'),
                 (source.get('commit') or '?')[:12],
                 ' (with local changes)' if source.get('modified') else ''),
             '- Python %s; %s' % (v.get('python'), results.get('valgrind'))]
    return '\n'.join(lines + instructions.section(results)) + '\n'


def render(results):
    if results.get('instructions') is not None and not results['runs']:
        return instruction_report(results)
    table = cells(results)
    names = targets(results)
    pages = [p for p in results['settings']['pages']
             if any(k[1] == p for k in table)]
    modes = [m for m in results['settings']['modes']
             if any(k[2] == m for k in table)]
    first, fixed = latency.sections(results, names)
    lines = header(results) + ([''] + first if first else [])
    marks = remote_marks(results)
    by_database = headline.section(results)
    lines += [''] + by_database if by_database else []
    lines += ['', '## Engines', ''] + status_table(results)
    lines += memory_section(results)
    lines += cost.section(results)
    lines += orm_price.section(results)
    for mode in modes:
        lines += ['', '## Median requests/s, %s' % mode, '']
        lines += overview(table, names, pages, mode, marks)
        ratio_lines = ratio_overview(table, names, pages, mode, marks)
        if ratio_lines:
            lines += ['', '### Ratios, %s' % mode, ''] + ratio_lines
    for page in pages:
        lines += ['', '## %s' % page, '', '![%s](chart-%s.png)' % (page, page)]
        for mode in modes:
            if any(k[1:] == (page, mode) for k in table):
                lines += ['', '### %s · %s' % (page, mode), '']
                lines += page_table(table, names, page, mode,
                                    ceiling_report.ceilings(results, page), marks)
        lines += fixed.get(page, [])
    for page in results['settings']['pages']:   # fixed rates only (the mix)
        if page not in pages and fixed.get(page):
            lines += ['', '## %s' % page] + fixed[page]
    lines += python_tables(results, table, pages, modes)
    lines += profile_tables(results)
    lines += ceiling_report.section(results)
    lines += instructions.section(results)
    return '\n'.join(lines) + '\n'


def write(results, out):
    path = os.path.join(out, 'results.md')
    with open(path, 'w') as f:
        f.write(render(results))
    return path

