"""Writing a one-engine site into a directory: its pruned modules, the
database's schema, the templates and static files, a small data set, the
deploy recipe, its run.sh, requirements, README and tests."""
import ast
import json
import os
import re
import shutil
import subprocess
import sys

import dataset
from runtime import frameworks
from runtime.databases import table

from . import modules, plan, tests

ROOT = modules.ROOT
FILES = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'files')
PACKS = 6           # the data set: 324 stickers and their pictures
# Debian packages of each database's server.
DEBIAN = {'tarantool': 'tarantool', 'postgres': 'postgresql',
          'redis': 'redis-server'}
TITLES = {'tarantool': 'Tarantool', 'postgres': 'PostgreSQL',
          'redis': 'Redis'}
# Packages a site needs that nothing imports by name (redis-py's parser).
OPTIONAL = {'redis': ('hiredis',)}
TEST_DISTRIBUTIONS = ('pytest', 'pytest-asyncio', 'pytest-timeout')


def version():
    """This project's version, as git describes it."""
    try:
        return subprocess.run(
            ['git', 'describe', '--always', '--dirty', '--tags'], cwd=ROOT,
            capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return 'unknown'


def write(directory, path, text, mode=0o644):
    full = os.path.join(directory, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, 'w') as f:
        f.write(text)
    os.chmod(full, mode)


def copy_tree(directory, path):
    shutil.copytree(os.path.join(ROOT, path), os.path.join(directory, path),
                    ignore=shutil.ignore_patterns('__pycache__'))


def build(engine, directory):
    """Write the site of `engine` into `directory` (empty or missing)."""
    db = table.of(engine)
    driver = table.DRIVER[engine.driver]
    site_tests = tests.sources(engine)
    sources = plan.sources(engine, extra=site_tests.values())
    for path, source in sources.items():
        write(directory, path, source)
    for path, source in site_tests.items():
        write(directory, path, source)
    # The driver's schema and server files (Lua, SQL) beside its module.
    folder = os.path.dirname(modules.path_of(driver.data.split(':')[0]))
    for name in sorted(os.listdir(os.path.join(ROOT, folder))):
        if not name.endswith(('.py', '.pyc')) and os.path.isfile(
                os.path.join(ROOT, folder, name)):
            shutil.copy(os.path.join(ROOT, folder, name),
                        os.path.join(directory, folder, name))
    # What is read, not imported: the schema of the raw drivers' module
    # too (the SQLAlchemy driver's shares it), Django's migrations.
    for path in sources:
        where = os.path.dirname(path)
        if where.startswith('data_interface/') and where != folder:
            for name in sorted(os.listdir(os.path.join(ROOT, where))):
                if name.endswith(('.sql', '.lua')):
                    shutil.copy(os.path.join(ROOT, where, name),
                                os.path.join(directory, where, name))
    if os.path.isdir(os.path.join(ROOT, folder, 'migrations')):
        copy_tree(directory, os.path.join(folder, 'migrations'))
    copy_tree(directory, 'templates')
    copy_tree(directory, 'static')
    write_data(directory)
    write_deploy(directory, engine)
    schema = sorted(os.path.join(folder, name) for name in os.listdir(
        os.path.join(directory, folder)) if name.endswith(('.lua', '.sql')))
    fill = dict(engine=engine.name, framework=engine.framework,
                database=db.name, database_title=TITLES[db.name],
                version=version(), schema=', '.join(
                    '`%s`' % path for path in schema),
                adapter=frameworks.BY_NAME[engine.framework].folder,
                packages=' '.join((DEBIAN[db.name], 'python3-venv')))
    write(directory, 'pytest.ini', pytest_ini(site_tests.values()))
    for name, mode in (('run.sh', 0o755), ('README.md', 0o644),
                       ('gitignore', 0o644)):
        with open(os.path.join(FILES, name)) as f:
            text = f.read()
        for key, value in fill.items():
            text = text.replace('{%s}' % key, value)
        if name == 'run.sh':
            text = text.replace('{functions}\n', shell_functions())
        write(directory, '.gitignore' if name == 'gitignore' else name,
              text, mode)
    write(directory, 'requirements.txt',
          requirements(engine, directory, site_tests.values()))


def pytest_ini(tests):
    """This project's pytest.ini with only the marks the tests use, and
    no lanes."""
    used = set(re.findall(r'pytest\.mark\.(\w+)', ''.join(tests)))
    with open(os.path.join(ROOT, 'pytest.ini')) as f:
        text = f.read()
    out, section = [], None
    for line in text.splitlines():
        if re.match(r'\w+ *=', line):
            section = line.split('=')[0].strip()
        if section == 'filterwarnings' or 'lanes' in line:
            continue
        mark = re.match(r' +(\w+):', line)
        if section == 'markers' and mark and mark.group(1) not in used:
            continue
        if line.startswith('#'):    # they speak of the lanes, bench.py
            continue
        out.append(line)
    return '\n'.join(out) + '\n'


def write_data(directory):
    """data/stickers.json (a dump, dataset/dump.py) and data/img/, its
    pictures: the generated data set, small."""
    chosen = dataset.generate(packs=PACKS)
    dataset.write_images(os.path.join(directory, 'data', 'img'), packs=PACKS)
    packs = []
    for p in chosen.packs:
        packs.append({'name': p.name, 'title': p.title, 'stickers': [
            {'image': s.image, 'rating': s.rating}
            for s in chosen.stickers if s.pack == p.name]})
    write(directory, 'data/stickers.json',
          json.dumps({'packs': packs}, indent=0) + '\n')


def write_deploy(directory, engine):
    """deploy/: the systemd unit and nginx's files, for this engine and
    the pictures under data/img."""
    for name in sorted(os.listdir(os.path.join(ROOT, 'deploy'))):
        with open(os.path.join(ROOT, 'deploy', name)) as f:
            text = f.read()
        text = re.sub(r'-e [a-z0-9-]+ ', '-e %s ' % engine.name, text)
        text = text.replace('/var/img/', '/data/img/')
        text = text.replace('docs/deploy.md', 'README.md')
        write(directory, os.path.join('deploy', name), text)


def shell_functions():
    """The functions of this project's run.sh that install: the Debian
    packages, the virtualenv from the pins."""
    with open(os.path.join(ROOT, 'run.sh')) as f:
        text = f.read()
    found = []
    for name in ('say', 'as_root', 'install_packages', 'main_python',
                 'make_venv'):
        m = re.search(r'(?:^#[^\n]*\n)*^%s\(\) \{.*?^\}\n' % name, text,
                      re.M | re.S)
        found.append(m.group(0))
    return '\n'.join(found)


def third_party(sources, directory):
    """The top-level modules `sources` import that are neither the
    standard library's nor the site's (in `directory`)."""
    found = set()
    for source in sources:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                found.update(a.name.split('.')[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level:
                found.add(node.module.split('.')[0])
    return {m for m in found if m not in sys.stdlib_module_names
            and m not in ('conftest', 'plugins')
            and not os.path.exists(os.path.join(directory, m))
            and not os.path.exists(os.path.join(directory, m + '.py'))}


def requirements(engine, directory, tests):
    """The pins of this project's requirements.txt that the site uses:
    the distributions of what its modules and `tests` (their sources)
    import (run in `directory`), what they need, the loop's."""
    framework = frameworks.BY_NAME[engine.framework]
    driver = table.DRIVER[engine.driver]
    wanted = list(framework.modules) + list(driver.modules)
    wanted += list(OPTIONAL.get(table.of(engine).name, ()))
    if engine.loop == 'uvloop':
        wanted.append('uvloop')
    wanted += ['pytest', 'pytest_asyncio', 'pytest_timeout']
    wanted += sorted(third_party(tests, directory) - set(wanted))
    probe = ('import sys, importlib; sys.path.insert(0, "."); '
             'import server; from runtime import frameworks; '
             'frameworks.adapter(%r); importlib.import_module(%r); '
             'import %s; print("\\n".join(sorted(sys.modules)))'
             % (engine.framework, driver.data.split(':')[0],
                ', '.join(wanted)))
    loaded = subprocess.run([sys.executable, '-c', probe], cwd=directory,
                            capture_output=True, text=True, check=True)
    tops = {m.split('.')[0] for m in loaded.stdout.split()}
    return pins(tops, TEST_DISTRIBUTIONS)


def _key(name):
    return re.sub(r'[-_.]+', '-', name).lower()


def pins(tops, distributions):
    """The lines of requirements.txt for the distributions of the modules
    `tops` and `distributions`, with all they require."""
    from importlib import metadata
    from packaging.requirements import Requirement
    owners = metadata.packages_distributions()
    todo = [d for m in tops for d in owners.get(m, ())] + list(distributions)
    seen = set()
    while todo:
        name = _key(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            needs = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for text in needs:
            r = Requirement(text)
            if r.marker is None or r.marker.evaluate({'extra': ''}):
                todo.append(r.name)
    with open(os.path.join(ROOT, 'requirements.txt')) as f:
        lines = f.read().splitlines()
    kept = [line for line in lines if line and not line.startswith('#')
            and _key(re.split(r'[=<>~ ]', line)[0]) in seen]
    return '\n'.join(kept) + '\n'
