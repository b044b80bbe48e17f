"""Which of this project's modules a site needs: those its entry points
import, followed through every import (a function's too), after pruning."""
import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def path_of(name):
    """The file of module `name` in this project, or None."""
    base = os.path.join(ROOT, *name.split('.'))
    for path in (base + '.py', os.path.join(base, '__init__.py')):
        if os.path.isfile(path):
            return os.path.relpath(path, ROOT)
    return None


def name_of(path):
    """'runtime/databases/__init__.py' -> 'runtime.databases'."""
    parts = path[:-len('.py')].split('/')
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def imported(path, source):
    """The project modules `source` (the file `path`) imports."""
    package = name_of(path)
    if not path.endswith('__init__.py'):
        package = package.rpartition('.')[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                parts = package.split('.')
                parts = parts[:len(parts) - node.level + 1]
                base = '.'.join(p for p in parts + [base] if p)
            names = [base] + ['%s.%s' % (base, a.name) for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split('.')
            for i in range(1, len(parts) + 1):    # the packages above it
                p = path_of('.'.join(parts[:i]))
                if p:
                    found.add(p)
    return found


def follow(entries, read):
    """{path: source} of the entry files and all they import; `read(path)`
    gives a file's (pruned) source."""
    sources, todo = {}, list(entries)
    while todo:
        path = todo.pop()
        if path in sources:
            continue
        sources[path] = read(path)
        todo.extend(imported(path, sources[path]) - set(sources))
    return sources
