"""Command line of bench.py."""
import argparse
import fnmatch
import os
import shutil
import signal
import subprocess
import sys
import time

from . import (advise, instructions, instructions_run, outline, pythons,
               remote, storage)
from .latency import budget, mixed, oha
from .profile import py_spy
from .runner import RunPlan, planned
from .wrk import PAGES, PLAIN_ONLY
from runtime import options
from runtime.databases import table as databases
from runtime.settings import DEFAULTS as SITE, ROOT, STORAGES

QUICK = {'duration': 1, 'warmup': 1, 'runs': 1}
DEFAULTS = {'duration': 10, 'warmup': 2, 'runs': 3}
# A first run: three frameworks on Tarantool over one connection, one on a
# PostgreSQL pool, the pages that show the framework, a read and a write,
# then the mix of visitors who vote at fixed rates (its capacity).
FIRST = {'engines': ['aiohttp-tarantool-one-uvloop', 'granian-tarantool-one-uvloop',
                     'fastapi-tarantool-one-uvloop', 'aiohttp-postgres-pool-uvloop'],
         'pages': ['ugly', 'good', 'index', mixed.PAGE], 'modes': ['plain'],
         'duration': 2, 'warmup': 1, 'runs': 1}
FIRST_FRACTIONS = (0.5, 0.9)    # the mix's rate steps, then the probes


def fractions(text):
    try:
        values = [float(x) for x in comma_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError('%r is not a list of fractions' % text)
    if not values or min(values) <= 0 or max(values) > 1.5:
        raise argparse.ArgumentTypeError('fractions must be above 0 and up to 1.5')
    return tuple(sorted(set(values)))


def rates(text):
    try:
        values = [float(x) for x in comma_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError('%r is not a list of requests/s' % text)
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError('rates must be above zero')
    return sorted(set(values))


def slo(text):
    try:
        return budget.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e))


def price(text):
    try:
        return advise.number(text, 'dollars per core-hour (e.g. 0.04)')
    except advise.Refused as e:
        raise argparse.ArgumentTypeError(str(e))


def comma_list(text):
    return [x.strip() for x in text.split(',') if x.strip()]


def rate_pages(text):
    """'mix,good:1' -> [('mix', None), ('good', 1)]: pages, each with its
    number of capacity searches (None: --runs)."""
    found = []
    for item in comma_list(text):
        page, _, count = item.partition(':')
        if count and not (count.isdigit() and int(count) > 0):
            raise argparse.ArgumentTypeError(
                '%r: PAGE or PAGE:SEARCHES, SEARCHES a whole number above 0'
                % item)
        found.append((page.strip(), int(count) if count else None))
    return found


def parser():
    p = argparse.ArgumentParser(
        prog='bench.py', description='Verify, then time every engine with wrk '
        '(plus nginx as a C reference); write results.json, results.md and '
        'charts.')
    p.add_argument('--engines', type=comma_list, metavar='A,B,…',
                   help='engine names or globs (default: all, none with '
                        '--ceilings; see python server.py --list)')
    p.add_argument('--target', action='append', type=comma_list,
                   metavar='URL', help='a site already running, here or '
                   'elsewhere (http://HOST:PORT; repeat it or give a comma '
                   'list): verified and timed like an engine, not started; '
                   'alone it runs no engine')
    p.add_argument('--label', action='append', metavar='NAME',
                   help="each --target's row name, in order (default "
                        "HOST:PORT)")
    p.add_argument('--pages', type=comma_list,
                   metavar='P,…', help='of %s (default all); with --latency '
                   'also %s: visitors who GET / then vote or read a page '
                   '(loadgen)' % (','.join(PAGES), mixed.PAGE))
    modes = p.add_mutually_exclusive_group()
    modes.add_argument('--plain', dest='modes', action='store_const',
                       const=['plain'], help='one request at a time per connection')
    modes.add_argument('--pipelined', dest='modes', action='store_const',
                       const=['pipelined'], help='WRK_PIPELINE requests at a time')
    modes.add_argument('--both', dest='modes', action='store_const',
                       const=['plain', 'pipelined'], help='both (default)')
    p.add_argument('--connections', type=options.COUNT, default=100, metavar='N')
    options.add_duration(p, None, 'per timed run', shown=DEFAULTS['duration'])
    options.add_warmup(p, None, 'of untimed load before the runs',
                       shown=DEFAULTS['warmup'])
    p.add_argument('--runs', type=options.COUNT, metavar='N',
                   help='timed runs per page and mode (default 3)')
    p.add_argument('--threads', type=options.COUNT, default=1, metavar='N',
                   help='wrk threads (default 1)')
    p.add_argument('--pipeline', type=options.COUNT, default=16, metavar='N',
                   help='pipeline depth of pipelined runs (default 16)')
    p.add_argument('--timeout', type=options.SECONDS, default=2,
                   metavar='SECONDS', help="wrk's request timeout (default 2)")
    p.add_argument('--quick', action='store_true',
                   help='CI smoke run: %(duration)d s runs, %(warmup)d s warmup, '
                        '%(runs)d run' % QUICK)
    p.add_argument('--first', action='store_true',
                   help='a first run of a few minutes: %s; pages %s (plain, '
                        '%d run of %d s), the mix at fixed rates (its '
                        'capacity); explicit flags still win' % (
                            ', '.join(FIRST['engines']),
                            ','.join(FIRST['pages']), FIRST['runs'],
                            FIRST['duration']))
    p.add_argument('--dry-run', action='store_true',
                   help='print the plan and its expected duration, then exit')
    p.add_argument('--core-hour-price', type=price, default=advise.PRICE,
                   metavar='DOLLARS',
                   help='$ per core-hour for the cost per million requests '
                        '(default %g: %s)' % (advise.PRICE, advise.SOURCE))
    p.add_argument('--profile', action='store_true',
                   help='one extra run per engine and page under py-spy: '
                        'CPU per request by layer (framework, pages, '
                        'templates, driver, kernel, database)')
    p.add_argument('--ceilings', '--limits', action='store_true',
                   help='the ceilings under the pages: time each database '
                        'call of the pages inside the database, through each '
                        'driver alone and through HTTP, and each page '
                        'rendered without I/O')
    p.add_argument('--latency', action='store_true',
                   help='after each page\'s closed-loop runs, offer it fixed '
                        'rates with oha (open model, latency counted from '
                        'when each request was due) and search the highest '
                        'rate within --slo')
    p.add_argument('--rates', type=rates, metavar='R,…',
                   help='with --latency: requests/s to offer (default %s of '
                        'each page\'s own saturation rate)' % ', '.join(
                            '%d%%%%' % (f * 100) for f in RunPlan.fractions))
    p.add_argument('--fractions', type=fractions, metavar='F,…',
                   help='with --latency: the rate steps as fractions of each '
                        'page\'s own saturation rate, above 0 and up to 1.5 '
                        '(default %s)' % ','.join('%g' % f for f in RunPlan.fractions))
    p.add_argument('--point-duration', type=options.SECONDS, metavar='SECONDS',
                   help='with --latency: seconds per fixed-rate point '
                        '(default --duration)')
    p.add_argument('--confirm', type=options.WARMUP, metavar='SECONDS',
                   help='with --latency: seconds of the run that confirms each '
                        'search\'s capacity; a miss steps it down (default '
                        '%d; --quick, --first: the point duration; 0: none)'
                        % RunPlan.confirm)
    p.add_argument('--rate-pages', type=rate_pages, metavar='P[:N],…',
                   help='with --latency: the pages offered fixed rates (default '
                        'every page), each searched for its capacity N times '
                        '(default --runs); the others are timed closed loop only')
    p.add_argument('--slo', type=slo, metavar='PCT=BUDGET',
                   help='with --latency: the latency budget of the capacity '
                        'search (default %s; percentiles %s)' % (
                            budget.DEFAULT, ', '.join(oha.FIGURES)))
    p.add_argument('--out', metavar='DIR',
                   help='output directory (default results/<timestamp>)')
    p.add_argument('--port', type=options.COUNT, default=SITE.port,
                   help="the engines' port (default %d)" % SITE.port)
    p.add_argument('--no-pin', action='store_true',
                   help='do not pin server and wrk to separate cores')
    p.add_argument('--databases-apart', action='store_true',
                   help="the databases server.py starts run on the load "
                        "generator's core, not the server's: each tier on a "
                        "core of its own but the generator (a Redis "
                        "Cluster's six nodes otherwise share the server's)")
    options.add_databases(p, text=True, note='passed to server.py: ')
    p.add_argument('--forget-visitors-in-given', action='store_true',
                   help='engines on a database given by address start with '
                        'server.py --forget-visitors too, which removes every '
                        'session and ballot it holds (default: they start '
                        'with them; the local databases are always emptied '
                        'of them)')
    p.add_argument('--tarantool-engine', dest='storages', type=comma_list,
                   metavar='E,…',
                   help='serve every Tarantool engine on each of these '
                        'storage engines, in turns: memtx, vinyl (default '
                        'memtx); each has its own local Tarantool')
    options.add_replicas(p, note='each Tarantool and PostgreSQL engine '
                         'served in turns with none and with N (server.py '
                         '--replicas): ')
    options.add_packs(p, None, note='passed to server.py: ')
    options.add_redis_fsync(p, None, note='passed to server.py: ')
    options.add_delay(p, None, note='passed to server.py: ')
    p.add_argument('--pythons', '--python', type=comma_list, metavar='V,…',
                   help='run every engine and its bare hello once per '
                        'interpreter: versions (3.12) or paths (default: '
                        'this one); each gets its own environment '
                        '(.venv-3.12) from requirements.txt, made on first use')
    p.add_argument('--list', action='store_true',
                   help='say which engines run on each interpreter, then exit')
    options.add_workers(p, note='passed to server.py (nginx gets as many, '
                        'the hello references one): ')
    p.add_argument('--instructions', action='store_true',
                   help='instead of timing: instructions per request of each '
                        'engine and page under valgrind (pages default %s, '
                        'engines %s; see docs/benchmark.md)' % (
                            ','.join(instructions.PAGES),
                            ','.join(instructions.CHECK_ENGINES)))
    p.add_argument('--requests', type=counts, metavar='N1,N2',
                   default=(instructions.N1, instructions.N2),
                   help='with --instructions: the counted requests of the '
                        'two runs whose difference is counted (default '
                        '%d,%d)' % (instructions.N1, instructions.N2))
    return p


def counts(text):
    try:
        n1, n2 = [int(x) for x in comma_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError('%r is not N1,N2' % text)
    if not 0 <= n1 < n2:
        raise argparse.ArgumentTypeError('N1,N2: 0 <= N1 < N2')
    return n1, n2


def select_engines(patterns, fail, interpreters=None):
    """(engines that can run, {engine name: [Interpreter]}, [(name, why
    not)]) in registry order. An engine runs on each interpreter that has
    its packages; one that none has but the legacy environment does runs
    there."""
    from runtime import engines
    chosen = set()
    for pattern in patterns:
        found = [e.name for e in engines.ENGINES
                 if fnmatch.fnmatchcase(e.name, pattern)]
        if not found:
            fail('no engine matches %r; the engines are:\n\n%s'
                 % (pattern, engines.listing()))
        chosen.update(found)
    several = interpreters is not None and len(interpreters) > 1
    interpreters = interpreters or [pythons.MAIN]
    try:
        status = [pythons.engines_on(i) for i in interpreters]
    except LookupError as e:
        fail(str(e))
    runnable, where, skipped = [], {}, []
    for e in engines.ENGINES:
        if e.name not in chosen:
            continue
        on = [i for i, s in zip(interpreters, status) if s[e.name][0] == 'yes']
        if not on and any(s[e.name][0].startswith('via ') for s in status):
            on = [pythons.legacy()]     # legacy engines keep their 3.7
        elif not on:
            why = [(pythons.label(e.name, i, several), s[e.name][0][len('no: '):])
                   for i, s in zip(interpreters, status)]
            skipped += why if several else why[:1]
        elif several:
            skipped += [(pythons.label(e.name, i, several), s[e.name][1])
                        for i, s in zip(interpreters, status) if i not in on]
        if on:
            runnable.append(e)
            where[e.name] = on
    return runnable, where, skipped


def listing(patterns, interpreters, fail):
    """Which engines run on each interpreter, as a table."""
    from runtime import engines
    try:
        status = [pythons.engines_on(i) for i in interpreters]
    except LookupError as e:
        fail(str(e))
    names = [e.name for e in engines.ENGINES
             if any(fnmatch.fnmatchcase(e.name, p) for p in patterns)]
    rows = [['ENGINE'] + ['PYTHON ' + i.version for i in interpreters]]
    rows += [[n] + [s[n][0] for s in status] for n in names]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return '\n'.join('  '.join(c.ljust(w) for c, w in zip(r, widths)) + '  '
                     + r[-1] for r in rows)


def remote_sites(args, fail):
    """[(label, url)] of the --target sites, checked."""
    from runtime import engines
    urls = [url for group in args.target or [] for url in group]
    labels = args.label or []
    if labels and len(labels) != len(urls):
        fail('--label: one per --target (%d labels, %d targets)'
             % (len(labels), len(urls)))
    try:
        urls = [remote.parse(url) for url in urls]
    except ValueError as e:
        fail('--target: %s' % e)
    labels = labels or [remote.default_label(url) for url in urls]
    for label in labels:
        why = remote.bad_label(label, engines.BY_NAME)
        if why:
            fail('--label: ' + why)
    if len(set(labels)) != len(labels):
        fail('--label: each --target needs a label of its own')
    return list(zip(labels, urls))


def pinning(no_pin, workers=1, apart=False):
    """Server on the last `workers` usable cores, wrk on the first (on all
    the others with several workers), when there are more cores than
    workers; with apart, the databases the server starts on wrk's."""
    cores = sorted(os.sched_getaffinity(0))
    if no_pin or len(cores) <= workers or shutil.which('taskset') is None:
        return {'server': [], 'wrk': [], 'databases': []}
    client = cores[:1] if workers == 1 else cores[:-workers]
    wrk = ['taskset', '-c', ','.join(map(str, client))]
    return {'server': ['taskset', '-c', ','.join(map(str, cores[-workers:]))],
            'wrk': wrk, 'databases': wrk if apart else []}


def first_run(args, fail):
    """Fill what --first sets and was not given; its fixed-rate pages (the
    mix), or None without the tools it needs (then it runs closed loop
    only)."""
    if args.quick or args.instructions:
        fail('--first is a run of its own: leave out --%s'
             % ('quick' if args.quick else 'instructions'))
    for key, value in FIRST.items():
        if getattr(args, key) is None:
            setattr(args, key, list(value) if isinstance(value, list) else value)
    if mixed.PAGE not in args.pages or args.latency:
        return None
    missing = [why for found, why in ((oha.find(), oha.INSTALL),
                                      (mixed.find(), mixed.INSTALL)) if not found]
    if missing:
        print('--first: without the mix: %s' % '; '.join(missing), file=sys.stderr)
        args.pages = [x for x in args.pages if x != mixed.PAGE]
        return None
    args.latency = True
    return [mixed.PAGE]


def plan(argv):
    p = parser()
    args = p.parse_args(argv)

    def fail(message):
        p.print_usage(sys.stderr)
        print('bench.py: error: ' + message, file=sys.stderr)
        sys.exit(2)

    fixed_pages = first_pages = first_run(args, fail) if args.first else None
    searches = {}
    pages_given = args.pages is not None
    args.pages = list(PAGES) if args.pages is None else args.pages
    if args.instructions:
        return instruction_plan(args, pages_given, fail)
    if (args.rates or args.slo or args.fractions or args.rate_pages
            or args.point_duration or args.confirm is not None) \
            and not args.latency:
        fail('--rates, --fractions, --rate-pages, --point-duration, --confirm '
             'and --slo go with --latency')
    if args.rates and args.fractions:
        fail('--rates or --fractions: the steps are either rates or fractions')
    if args.rate_pages:
        if fixed_pages is not None:
            fail('--first offers fixed rates to %s only: leave out --rate-pages'
                 % mixed.PAGE)
        searches = {page: n for page, n in args.rate_pages if n}
        args.rate_pages = [page for page, _ in args.rate_pages]
        stray = sorted(set(args.rate_pages) - set(args.pages) | (
            {'vote'} & set(args.rate_pages)))
        if stray:
            fail('--rate-pages %s: not among the pages that can be offered '
                 'fixed rates (%s)' % (','.join(stray), ','.join(
                     x for x in args.pages if x != 'vote')))
        # the mix has no closed-loop runs: it is always offered fixed rates
        fixed_pages = list(dict.fromkeys(args.rate_pages + [
            x for x in args.pages if x == mixed.PAGE]))
    if args.latency:
        if args.modes == ['pipelined']:
            fail('--latency: oha sends one request at a time per connection; '
                 'its runs are plain')
        if 'vote' in args.pages and fixed_pages is None:
            if pages_given:
                fail('--latency: the vote page needs the ballot of the answer '
                     'before it, which a fixed-rate generator of independent '
                     'requests cannot carry; time it without --latency')
            args.pages = [x for x in args.pages if x != 'vote']
        args.modes = args.modes or ['plain']
        args.slo = args.slo or budget.parse(budget.DEFAULT)
        args.oha = oha.find()
        if args.oha is None:
            fail('--latency: ' + oha.INSTALL)
        args.loadgen = mixed.find() if mixed.PAGE in args.pages else None
        if mixed.PAGE in args.pages and args.loadgen is None:
            fail('--pages %s: %s' % (mixed.PAGE, mixed.INSTALL))
    remotes = remote_sites(args, fail)
    if remotes and args.engines is None:
        # Options of the servers the bench starts; a site runs what it runs.
        for option, given in (('--profile', args.profile),
                              ('--workers', args.workers > 1),
                              ('--tarantool-engine', args.storages),
                              ('--pythons', args.pythons)):
            if given:
                fail('%s applies to the engines the bench starts, and '
                     '--target starts none (add --engines)' % option)
    if args.engines is None:
        args.engines = [] if args.ceilings or remotes else ['*']
        if args.ceilings and not remotes:   # the ceilings alone: no page to time
            args.pages = []
    try:
        interpreters = pythons.prepare(args.pythons) if args.pythons else None
    except (LookupError, subprocess.CalledProcessError) as e:
        fail('--pythons: %s' % e)
    if args.list:
        print(listing(args.engines, interpreters or [pythons.MAIN], fail))
        sys.exit(0)
    runnable, where, skipped = select_engines(args.engines, fail, interpreters)
    known = PAGES + ((mixed.PAGE,) if args.latency else ())
    unknown = [page for page in args.pages if page not in known]
    if unknown or not (args.pages or args.ceilings):
        fail('unknown pages %s; choose from %s%s' % (
            ','.join(unknown), ','.join(PAGES),
            '' if args.latency else ' (%s goes with --latency)' % mixed.PAGE))
    if args.databases_apart and args.no_pin:
        fail('--databases-apart pins the databases apart: leave out --no-pin')
    if args.threads > args.connections:
        fail('--threads (%d) cannot exceed --connections (%d)'
             % (args.threads, args.connections))
    for key, value in (QUICK if args.quick else DEFAULTS).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    # The addresses may hold passwords: server.py gets them in its
    # environment, never on a command line that `ps` or results.json shows.
    server_args, server_env = [], {}
    for db in databases.TABLE:
        if getattr(args, db.name):
            server_env[db.environment] = getattr(args, db.name)
    storages = args.storages or storage.DEFAULT
    if [x for x in storages if x not in STORAGES] or len(
            set(storages)) != len(storages):
        fail('--tarantool-engine: a list of %s, each once'
             % ', '.join(STORAGES))
    if args.tarantool and args.storages:
        fail('--tarantool-engine: the Tarantool of --tarantool has the engine '
             'it was started with; leave out one of them')
    if args.forget_visitors_in_given and not server_env:
        fail('--forget-visitors-in-given: no database is given by address '
             '(--%s)' % ', --'.join(db.name for db in databases.TABLE))
    if args.replicas and (args.tarantool or args.postgres):
        fail('--replicas starts replicas of the local databases: leave out '
             '--tarantool and --postgres (or pass their replicas to '
             'server.py yourself)')
    if args.packs:
        server_args += ['--packs', str(args.packs)]
    if args.delay:
        server_args += ['--delay', '%g' % args.delay]
    if args.redis_fsync:
        server_args += ['--redis-fsync', args.redis_fsync]
    if args.workers > 1:
        if args.profile:
            fail('--profile samples one process: leave out --workers')
        server_args += ['--workers', str(args.workers)]
    modes = args.modes or ['plain', 'pipelined']
    if (args.pages and modes == ['pipelined']
            and set(args.pages) <= set(PLAIN_ONLY)):
        fail('nothing to time: %s runs plain only' % ','.join(PLAIN_ONLY))
    out = args.out or os.path.join(ROOT, 'results', time.strftime('%Y%m%d-%H%M%S'))
    if shutil.which('wrk') is None:
        fail('wrk is not installed (./run.sh setup, or apt-get install wrk)')
    if args.profile and py_spy() is None:
        fail('--profile needs py-spy (pip install -r requirements.txt)')
    return RunPlan(
        engines=runnable, where=where, skipped=skipped,
        pythons=interpreters or [], several=bool(interpreters and len(interpreters) > 1),
        pages=list(dict.fromkeys(args.pages)), modes=modes, out=os.path.abspath(out),
        connections=args.connections, duration=args.duration,
        warmup=args.warmup, runs=args.runs, threads=args.threads,
        pipeline=args.pipeline, timeout=args.timeout, port=args.port,
        server_args=server_args, server_env=server_env, storages=storages,
        forget_given=args.forget_visitors_in_given,
        replicas=args.replicas,
        pin=pinning(args.no_pin, args.workers, args.databases_apart),
        profile=args.profile, workers=args.workers, ceilings=args.ceilings,
        latency=args.latency, rates=args.rates, slo=args.slo,
        oha=getattr(args, 'oha', None), loadgen=getattr(args, 'loadgen', None),
        oha_version=args.latency and oha.version(args.oha), remotes=remotes,
        fixed_pages=fixed_pages, searches=searches,
        core_hour_price=args.core_hour_price,
        point_duration=args.point_duration or args.duration,
        confirm=(args.confirm if args.confirm is not None else
                 (args.point_duration or args.duration)
                 if args.quick or args.first else RunPlan.confirm),
        fractions=args.fractions or (
            FIRST_FRACTIONS if first_pages else RunPlan.fractions),
        dry_run=args.dry_run)


def instruction_plan(args, pages_given, fail):
    """The arguments of a bench.py --instructions run, checked."""
    addresses = tuple(d.name for d in databases.TABLE)    # --NAME
    for option in ('target', 'profile', 'ceilings', 'latency', 'pythons',
                   'storages', 'replicas', 'modes') + addresses + (
                   'forget_visitors_in_given', 'packs', 'delay', 'redis_fsync',
                   'dry_run'):
        if getattr(args, option):
            fail('--instructions counts the engines the bench starts, one '
                 'process each, on their default options: leave out --%s'
                 % {'storages': 'tarantool-engine', 'modes': 'plain/--pipelined'}.get(
                     option, option.replace('_', '-')))
    if args.workers > 1:
        fail('--instructions counts one process: leave out --workers')
    if not pages_given:
        args.pages = list(instructions.PAGES)
    unknown = [x for x in args.pages if x not in instructions.MARKERS]
    if unknown:
        fail('--instructions: unknown pages %s; choose from %s (the vote '
             'page changes the data each next request reads)'
             % (','.join(unknown), ','.join(instructions.MARKERS)))
    args.pages = list(dict.fromkeys(args.pages))
    args.runnable, args.where, skipped = select_engines(
        args.engines or list(instructions.CHECK_ENGINES), fail)
    for name, why in skipped:
        print('skipped %s: %s' % (name, why), file=sys.stderr)
    if instructions.valgrind() is None:
        fail('--instructions: ' + instructions.MISSING)
    args.out = os.path.abspath(args.out or os.path.join(
        ROOT, 'results', time.strftime('%Y%m%d-%H%M%S')))
    return args


def interrupt(signum, frame):
    raise KeyboardInterrupt()


def main(argv=None):
    from . import charts, cost, html, report
    from .runner import Matrix
    s = plan(sys.argv[1:] if argv is None else argv)
    if getattr(s, 'instructions', False):
        return instructions_run.bench(s)
    print('\n'.join(outline.lines(s, planned(s))), file=sys.stderr, flush=True)
    if s.dry_run:
        return 0
    matrix = Matrix(s)
    if s.profile:
        print('profiling: one extra run per engine and page under py-spy, '
              'separate from the timed runs (sampling slows the server a '
              'little, so its req/s are not reported)', file=sys.stderr)
    signal.signal(signal.SIGTERM, interrupt)
    try:
        results = matrix.run()
    except KeyboardInterrupt:
        # Report what was measured; the servers were stopped on the way out.
        matrix.progress.close()
        results = matrix.results
        results['interrupted'] = True
        matrix.save()
        print('interrupted: writing what was measured', file=sys.stderr)
    results['settings']['core_hour_price'] = s.core_hour_price
    results['cost'] = cost.records(results, s.core_hour_price)
    matrix.save()
    markdown = report.write(results, s.out)
    pictures = charts.write(results, s.out)
    print('results: %s\n         %s\ncharts:  %s\nopen:    %s' % (
        os.path.join(s.out, 'results.json'), markdown,
        ', '.join(os.path.basename(p) for p in pictures) or 'none',
        html.write(s.out)))
    if results.get('interrupted'):
        return 130
    failed = [t['name'] for t in results['targets'] if t['status'] == 'failed']
    if failed:
        print('failed: %s (see results.md)' % ', '.join(failed), file=sys.stderr)
        return 1
    return 0
