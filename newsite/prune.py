"""Pruning a module's source in the few ways the generator needs, by its
syntax tree and without touching the rest of the text: definitions dropped
by name, assignments given a new value, imports that nothing uses any more
removed. A name that is not found is an error, so that the generator fails
loudly when this project's modules change under it."""
import ast
import re


class PruneError(ValueError):
    """A name to prune that the module does not define."""


def _named(body, name):
    """The statement of `body` that defines `name`, or None."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                             ast.ClassDef)) and node.name == name:
            return node
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AnnAssign)
                   else [])
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return node
    return None


def _find(tree, dotted, module):
    body, node = tree.body, None
    for part in dotted.split('.'):
        node = _named(body, part)
        if node is None:
            raise PruneError('%s defines no %s' % (module, dotted))
        body = getattr(node, 'body', [])
    return node


def _first_line(node, lines):
    """The node's first line, with its decorators and the comment lines
    right above it."""
    first = min([node.lineno] + [d.lineno for d in
                                 getattr(node, 'decorator_list', [])])
    while first > 1 and lines[first - 2].strip().startswith('#'):
        first -= 1
    return first


def prune(source, module='module', drop=(), values=None, doc=None,
          statements=None):
    """`source` without the definitions in `drop` ('NAME' at the top,
    'Class.NAME' inside a class), with the assignments of `values` ({name:
    the new value's source}) changed, without the statements of a function
    that mention one of the words `statements` gives for it ({function:
    words}; a compound statement whose first line does not mention one is
    looked into), its docstring `doc` if given, and without the imports
    left unused."""
    tree = ast.parse(source)
    lines = source.splitlines(True)
    edits = []     # (first line, first col, last line, last col, text)
    for name, words in (statements or {}).items():
        # '': the module's own statements.
        body = _find(tree, name, module).body if name else tree.body
        found = _mentioning(body, words, lines)
        if not found:
            raise PruneError('%s: %s mentions none of %s'
                             % (module, name, ', '.join(words)))
        edits.extend((_first_line(n, lines), 0, n.end_lineno + 1, 0, '')
                     for n in found)
    for name in drop:
        node = _find(tree, name, module)
        edits.append((_first_line(node, lines), 0, node.end_lineno + 1, 0, ''))
    for name, text in (values or {}).items():
        v = _find(tree, name, module).value
        edits.append((v.lineno, v.col_offset, v.end_lineno, v.end_col_offset,
                      text))
    if doc is not None:
        d = tree.body[0]
        edits.append((d.lineno, d.col_offset, d.end_lineno, d.end_col_offset,
                      '"""%s"""' % doc))
    source = _apply(lines, edits)
    return tidy(without_unused_imports(source))


def _mentioning(body, words, lines):
    """The statements of `body` (and of the blocks in it) that mention one
    of `words`."""
    found = []
    for node in body:
        text = ''.join(lines[node.lineno - 1:node.end_lineno])
        if not any(w in text for w in words):
            continue
        blocks = [getattr(node, f, []) for f in ('body', 'orelse',
                                                 'finalbody')]
        blocks += [h.body for h in getattr(node, 'handlers', [])]
        if any(blocks) and not any(w in lines[node.lineno - 1]
                                   for w in words):
            for block in blocks:
                found += _mentioning(block, words, lines)
        else:
            found.append(node)
    return found


def _apply(lines, edits):
    lines = list(lines) + ['']
    for l1, c1, l2, c2, text in sorted(edits, reverse=True):
        head = lines[l1 - 1][:c1]
        tail = lines[l2 - 1][c2:] if l2 <= len(lines) else ''
        lines[l1 - 1:l2] = [head + text + tail]
    return ''.join(lines)


def _used(tree):
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx,
                                                          ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)     # __all__, getattr by name
    return names


def without_unused_imports(source):
    """`source` without the imported names it never uses (an import marked
    `# noqa: F401` is a re-export, and kept)."""
    tree = ast.parse(source)
    lines = source.splitlines(True)
    used = _used(ast.Module(body=[n for n in ast.walk(tree)
                                  if not isinstance(n, (ast.Import,
                                                        ast.ImportFrom))],
                            type_ignores=[]))
    edits = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        text = ''.join(lines[node.lineno - 1:node.end_lineno])
        if 'noqa' in text:
            continue
        kept = [a for a in node.names
                if (a.asname or a.name).split('.')[0] in used]
        if len(kept) == len(node.names):
            continue
        indent = lines[node.lineno - 1][:node.col_offset]
        if kept:
            node.names = kept
            new = indent + ast.unparse(node) + '\n'
            if len(new) > 80 and isinstance(node, ast.ImportFrom):
                new = wrapped(indent, node)
        else:
            new = ''
        edits.append((node.lineno, 0, node.end_lineno + 1, 0, new))
    return _apply(lines, edits) if edits else source


def wrapped(indent, node, comment=''):
    """An import from, on lines of at most 79 characters; a comment (a
    noqa) on its first line, the names below it."""
    head = '%sfrom %s%s import (' % (indent, '.' * node.level,
                                     node.module or '')
    out, line = [], head
    if comment:
        out.append(head + '  ' + comment + '\n')
        line = indent + '    '
    for i, a in enumerate(node.names):
        part = a.name + (' as ' + a.asname if a.asname else '')
        part += ',' if i < len(node.names) - 1 else ')'
        if len(line) + len(part) + 1 > 79:
            out.append(line.rstrip() + '\n')
            line = indent + '    '
        line += part + ' '
    return ''.join(out) + line.rstrip() + '\n'


IDENTIFIER = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
# Bases whose subclasses' methods only this code calls.
PLAIN_BASES = ('object', 'ABC', 'Exception', 'ValueError', 'RuntimeError',
               'ConnectionError')


def names_used(sources):
    """Every name, attribute and identifier in a string the sources use."""
    used = set()
    for source in sources:
        for name in _used(ast.parse(source)):
            used.update(IDENTIFIER.findall(name))
    return used


def unused(source, used):
    """[dotted name] of the definitions in `source` that nothing in `used`
    names: functions, classes and constants at the top, and methods of the
    classes whose bases are this code's (a framework's protocol calls its
    subclass's methods itself). Decorated ones (routes, properties) stay."""
    tree = ast.parse(source)
    plain = set(PLAIN_BASES)
    found = []

    def dead(node):
        if getattr(node, 'decorator_list', None):
            return False
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                             ast.ClassDef)):
            name = node.name
        elif (isinstance(node, ast.Assign) and len(node.targets) == 1
              and isinstance(node.targets[0], ast.Name)):
            name = node.targets[0].id
        else:
            return False
        return not name.startswith('__') and name not in used and name

    for node in tree.body:
        name = dead(node)
        if name:
            found.append(name)
        if not isinstance(node, ast.ClassDef):
            continue
        bases = [ast.unparse(b).split('.')[-1] for b in node.bases]
        if all(b in plain for b in bases):
            plain.add(node.name)
            found += ['%s.%s' % (node.name, n.name) for n in node.body
                      if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                      and dead(n)]
    return found


def tidy(source):
    """At most two blank lines in a row, none at the end; a block left with
    no statement is an error (the generator pruned too much)."""
    source = re.sub(r'\n{4,}', '\n\n\n', source).rstrip('\n') + '\n'
    ast.parse(source)
    return source
