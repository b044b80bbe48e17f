"""A site's own tests: this project's contract suite on its database, the
page, vote and hostile-bytes tests through its framework, and the edge's
slow-client tests, with their fixtures cut down to its one database."""
import ast
import os

from runtime.databases import table

from . import modules
from .prune import wrapped, prune

# Site path: this project's.
FILES = {
    'tests/conftest.py': 'tests/conftest.py',
    'tests/plugins/__init__.py': 'tests/plugins/__init__.py',
    'tests/plugins/databases.py': 'tests/plugins/databases.py',
    'tests/plugins/backends.py': 'tests/plugins/backends.py',
    'tests/plugins/servers.py': 'tests/plugins/servers.py',
    'tests/plugins/waiting.py': 'tests/plugins/waiting.py',
    'tests/plugins/pagecheck.py': 'bench/pagecheck.py',
    'tests/test_contract.py': 'tests/test_contract.py',
    'tests/test_pages.py': 'tests/test_pages.py',
    'tests/test_hostile.py': 'tests/test_hostile.py',
    'tests/test_edge.py': 'tests/test_edge.py',
}
# What each database's fixtures are called in plugins/databases.py.
FIXTURES = {
    'tarantool': ('start_tarantool', 'tarantool_address', 'loaded_tarantool',
                  'tarantool', 'replicas_port'),
    'postgres': ('start_postgres', 'remove_postgres', 'postgres'),
    'redis': ('REDIS_PASSWORDS', 'start_redis', 'configure_redis', 'redis'),
    'rediscluster': ('CLUSTER_PASSWORDS', 'start_rediscluster',
                     'configure_rediscluster', 'rediscluster'),
}
# What a database's fixtures use of another's.
NEEDS = {'rediscluster': ('REDIS_PASSWORDS',)}
# The ORM drivers' own tables: {driver: {test path: its names there}}.
ORM = {
    'sqlalchemy': {'tests/plugins/backends.py': ['_sqlalchemy_backend'],
                   'tests/plugins/databases.py': ['postgres_orm']},
    'django': {'tests/plugins/backends.py': ['_django_backend',
                                             '_django_port'],
               'tests/plugins/databases.py': ['django_orm_loaded']},
}
CONFTEST_DOC = '''Real databases and real servers for the tests: the session
starts its own database in a temporary directory, loads the site's data
set, and starts server.py processes on free ports. What each part provides
is in plugins/: databases, backends (the contract suite's), servers,
waiting (polling).'''


def backend_key(engine):
    """The contract suite's name of the engine's backend."""
    driver = table.DRIVER[engine.driver]
    if driver.name in ('psycopg', 'sqlalchemy', 'django'):
        return 'postgres-%s-pool' % driver.name
    return '%s-%s' % (table.of(engine).name, engine.mode)


def backends_value(engine, source):
    """BACKENDS with the engine's one backend."""
    key = backend_key(engine)
    if key == 'postgres-psycopg-pool':
        return ("{%r: functools.partial(_postgres_backend, "
                "driver='psycopg')}" % key)
    if key in ('postgres-sqlalchemy-pool', 'postgres-django-pool'):
        return '{%r: _%s_backend}' % (key, key.split('-')[1])
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.Assign) and node.targets[0].id == 'BACKENDS':
            for k, v in zip(node.value.keys, node.value.values):
                if k.value == key:
                    return '{\n    %r: %s,\n}' % (
                        key, ast.get_source_segment(source, v))
    raise ValueError('tests/plugins/backends.py has no backend %s' % key)


def orm_names(engine, path):
    """The names in `path` of the ORM drivers other than the engine's."""
    driver = table.DRIVER[engine.driver].name
    return [n for d, paths in ORM.items() if d != driver
            for n in paths.get(path, ())]


def specs(engine, sources):
    db = table.of(engine).name
    others = [n for d, names in FIXTURES.items() if d != db for n in names
              if n not in NEEDS.get(db, ())]
    return {
        'tests/conftest.py': dict(
            doc=CONFTEST_DOC, drop=['collect_ignore'],
            values={'pytest_plugins': "['plugins.databases', "
                    "'plugins.backends', 'plugins.servers']"}),
        'tests/plugins/databases.py': dict(
            doc="The session's own %s in a temporary directory on a free "
                "port,\nwith the site's data set loaded." % db.capitalize(),
            drop=others + (['tarantool_vinyl'] if db == 'tarantool' else [])
            + orm_names(engine, 'tests/plugins/databases.py'),
            # The site's own data set, not one generated with packs.
            values={'TEST_PACKS':
                    "None    # the site's own (settings.dump)"}),
        'tests/plugins/backends.py': dict(
            drop=['_%s_backend' % d for d in FIXTURES if d != db]
            + orm_names(engine, 'tests/plugins/backends.py'),
            statements={'': ["find_spec('aiotarantool')",
                             "find_spec('psycopg_pool')",
                             "find_spec('sqlalchemy')",
                             "find_spec('django')"]},
            values={'BACKENDS': backends_value(
                engine, sources['tests/plugins/backends.py'])}),
        'tests/test_edge.py': dict(
            drop=['japronto_connection',
                  'test_a_head_sent_byte_by_byte_is_scanned_once',
                  'test_a_body_sent_byte_by_byte_is_not_scanned_again',
                  'TarantoolOutage', 'PostgresOutage', 'DjangoOutage',
                  'test_outage_is_logged_in_a_few_lines']),
        'tests/test_pages.py': dict(drop=['test_engine_list_is_complete']),
        # server.py --forget-visitors is the benchmark's.
        'tests/test_contract.py': dict(
            drop=['test_forget_visitors_removes_every_session_and_ballot']),
    }


def sources(engine):
    """{site path: source} of the site's tests."""
    found = {}
    for path, origin in FILES.items():
        with open(os.path.join(modules.ROOT, origin)) as f:
            found[path] = f.read().replace('bench.pagecheck',
                                           'plugins.pagecheck')
    spec = specs(engine, found)
    for path, keywords in spec.items():
        found[path] = prune(found[path], path, **keywords)
    return without_lost_names(found)


def defined(source):
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                             ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets
                         if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split('.')[0]
                         for a in node.names)
    return names


def without_lost_names(found):
    """The tests with no import of a name their plugins no longer have
    (another database's fixture)."""
    local = {'conftest': 'tests/conftest.py'}
    local.update({'plugins.' + p[len('tests/plugins/'):-3]: p
                  for p in found if p.startswith('tests/plugins/')})
    for _ in range(2):     # conftest re-exports the plugins' names
        for path, source in found.items():
            tree = ast.parse(source)
            lines = source.splitlines(True)
            for node in reversed([n for n in ast.walk(tree)
                                  if isinstance(n, ast.ImportFrom)
                                  and n.module in local]):
                have = defined(found[local[node.module]])
                kept = [a for a in node.names if a.name in have]
                if len(kept) == len(node.names):
                    continue
                indent = lines[node.lineno - 1][:node.col_offset]
                first = lines[node.lineno - 1]
                comment = first[first.index('#'):].strip() \
                    if '#' in first else ''
                node.names = kept
                text = wrapped(indent, node, comment) if kept else ''
                lines[node.lineno - 1:node.end_lineno] = [text]
            found[path] = ''.join(lines)
    return found
