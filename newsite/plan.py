"""What a one-engine site holds: this project's modules that engine
imports, each pruned to that engine (the framework and database tables
with its one row, the other databases' code, replicas and the legacy
interpreter's paths left out), then whatever nothing uses any more."""
import textwrap

import server
from runtime import frameworks
from runtime.databases import table

from . import modules
from .prune import names_used, prune, unused

ENGINE_DOC = '''The site's engine, named FRAMEWORK-DRIVER-MODE[-uvloop]: its
framework x its database driver and connection mode x its event loop.
'''
# Docstrings that describe the whole matrix, replaced.
DOC = {
    'server.py': '''Serve the sticker site.

    python server.py [-p PORT] [-l LEVEL] [--host HOST] [--workers N]
                     [--data DUMP.json] [--header-timeout S] ...
    python server.py --list

Every option: python server.py --help. The database's address, which may
hold a password, may come from the environment instead, or from a file of
arguments, one per line: python server.py @FILE.
''',
    'runtime/engines.py': ENGINE_DOC,
    'runtime/options.py': '''Options with a range check, each defined once.''',
    'dataset/__init__.py': '''The sticker data set, read from a JSON dump.

    read_dump(path) -> DataSet    (the format: dataset/dump.py)
''',
}


def listed(names, indent):
    """A tuple of the names, its lines wrapped at 79 characters."""
    text = textwrap.fill(', '.join(repr(n) for n in names), 79 - indent - 1,
                         break_long_words=False, break_on_hyphens=False)
    return '(' + text.replace('\n', '\n' + ' ' * (indent + 1)) + ')'


def driver_row(engine):
    """The source of the engine's one Driver, with its one mode."""
    d = table.DRIVER[engine.driver]
    return 'Driver(%r, %r, (%r,), %r,\n               False, True,\n' \
           '               %r),' % (d.name, d.database, engine.mode,
                                    d.modules, d.data)


def specs(engine):
    """{path: prune()'s keywords} for the engine's site."""
    db = table.of(engine)
    others = [d for d in table.TABLE if d is not db]
    cls = type(db).__name__
    # server.py's options the site keeps: not the replicas', the generated
    # data set's, the other databases' or the benchmark's (--delay, and
    # --forget-visitors and --snapshots-at-start, which a site would pay
    # for in lost visitors and logs that grow until a restart).
    dropped = {'replicas', 'replica_lag', 'packs', 'delay', 'forget_visitors',
               'snapshots_at_start'}
    dropped.update(d.name for d in table.TABLE)
    if db.name != 'redis':
        dropped.add('redis_fsync')
    if db.name != 'tarantool':
        dropped.add('tarantool_engine')
    kept = [o for o in server.OPTIONS
            if o not in dropped and not o.endswith('_replicas')]
    server_words = ['add_replicas', "'--replica-lag'", 'check_replicas(',
                    'add_packs', 'legacy_python', 'if python',
                    "'--forget-visitors'", "'--snapshots-at-start'"]
    edge_words = ['add_delay']
    if db.name != 'redis':
        server_words.append('add_redis_fsync')
    if db.name != 'tarantool':
        server_words.append("'--tarantool-engine'")
    opened = ['replicated(', 'primary']
    drop_databases = ['Databases._standbys']
    for o in others:
        drop_databases += ['Databases.' + o.name,
                           'Databases.find_' + o.name]
    if db.name != 'redis':
        drop_databases.append('Databases._configure_redis')
    statements = {
        'Databases.__init__': [o.name for o in others] + ['replicas'],
        'Databases._open': opened + ['forget_visitors']}
    if db.name == 'tarantool':
        statements['Databases.find_tarantool'] = ['replicas']
    if db.name == 'postgres':
        statements['Databases.find_postgres'] = ['replicas', '_standbys']
    return {
        'server.py': dict(
            doc=DOC['server.py'], drop=['check_replicas'],
            statements={'parse_args': server_words,
                        'add_edge_args': edge_words,
                        'find_engine': ['legacy_python', 'if python']},
            # The value inside OPTIONS = (...)'s parentheses.
            values={'OPTIONS': '%s\n           + tuple(db.name for db in '
                               'table.TABLE)' % listed(kept, 12)}),
        'runtime/engines.py': dict(
            doc=DOC['runtime/engines.py'],
            drop=['LEGACY', 'LEGACY_HOWTO', 'legacy_python', 'not_built'],
            statements={'unavailable': ['if legacy_only', 'not_built',
                                        'if why'],
                        'runs_here': ['legacy_python'],
                        '_build': ['framework.legacy']},
            values={'LOOPS': repr((engine.loop,))}),
        'runtime/options.py': dict(doc=DOC['runtime/options.py']),
        # The stall record is the benchmark's.
        'runtime/serve.py': dict(statements={'serve': ['stalls']}),
        'runtime/frameworks.py': dict(values={
            'FOLDERS': '(%r,)' % frameworks.BY_NAME[engine.framework].folder}),
        'runtime/databases/table.py': dict(
            drop=[type(o).__name__ for o in others]
            + ['REPLICATED', 'REFERENCE', 'replicated', 'Database.ceilings',
               'Database.ceilings_class', 'Database.managed_replica',
               'Database.replica_class', 'Database.storages']
            + ['%s.%s' % (cls, n) for n in ('ceilings_class', 'replica_class',
                                            'replicas', 'replica', 'storages')
               if n in vars(type(db))],
            values={'TABLE': '(%s(),)' % cls,
                    cls + '.drivers': '(\n        %s\n    )'
                    % driver_row(engine)}),
        'runtime/databases/__init__.py': dict(
            drop=drop_databases, statements=statements),
        'runtime/databases/tarantool.py': dict(
            drop=['ManagedReplica'],
            statements={'instance_env': ['snapshots_at_start']}),
        'runtime/databases/redis.py': dict(
            drop=['ManagedRedis._start', 'ManagedRedis.appended',
                  'ManagedRedis.rewrite'],
            statements={'ManagedRedis.__init__': ['snapshots_at_start']}),
        'runtime/databases/load.py': dict(
            drop=['forget_visitors'],
            statements={'data_set': ['dump is None'],
                        'load_if_empty': ['dump is None']}),
        'runtime/settings.py': dict(drop=[
            'Settings.forget_visitors', 'Settings.snapshots_at_start'],
            values={
            'Settings.dump': "os.path.join(ROOT, 'data', 'stickers.json')",
            'Settings.images': "property(\n        lambda self: "
                               "os.path.join(self.root, 'data', 'img'))"}),
        # server.py --forget-visitors's call, each driver's (its SQL and
        # Lua are the sweep's, and stay).
        'data_interface/tarantool/procedures.py': dict(
            drop=['Procedures.forget_visitors']),
        'data_interface/postgres/common.py': dict(
            drop=['PostgresCalls.forget_visitors']),
        'data_interface/redis/redis_data.py': dict(
            drop=['RedisData.forget_visitors']),
        'dataset/__init__.py': dict(
            doc=DOC['dataset/__init__.py'],
            values={'__all__': "['DataSet', 'read_dump', 'DumpError']"}),
    }


def entries(engine):
    """The files the site starts from: server.py, the adapter, the driver
    and the local database's server."""
    folder = frameworks.BY_NAME[engine.framework].folder
    driver = table.DRIVER[engine.driver]
    found = ['server.py', folder + '/__init__.py', folder + '/about.py']
    for where in (driver.data, table.of(engine).managed_class):
        found.append(modules.path_of(where.split(':')[0]))
    return found


def sources(engine, extra=()):
    """{path: pruned source} of the engine's site; `extra`: other sources
    (its tests) whose use of a name keeps it."""
    spec = specs(engine)
    pruned = {}

    def read(path):
        if path not in pruned:
            with open(modules.ROOT + '/' + path) as f:
                pruned[path] = prune(f.read(), path, **spec.get(path, {}))
        return pruned[path]
    start = entries(engine)
    while True:
        found = modules.follow(start, read)
        used = names_used(list(found.values()) + list(extra))
        changed = False
        for path, source in found.items():
            dead = unused(source, used)
            if dead:
                pruned[path] = prune(source, path, drop=dead)
                changed = True
        if not changed:
            return found
