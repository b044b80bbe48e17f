"""results.html: results.md as one self-contained page (charts inline, no
network), for reading in a browser or sending as one file."""
import html
import os
import re

from . import answer
from .colors import DATABASES
from .pictures import image

STYLE = '''
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 72em;
       padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: .6em 0 1.2em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: .25em .6em; }
th { background: #f0f0f0; position: sticky; top: 0; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr:nth-child(even) td { background: #fafafa; }
img { max-width: 100%; }
code { background: #f4f4f4; padding: 0 .2em; overflow-wrap: anywhere; }
.scroll { overflow-x: auto; }
details { margin: 1em 0; } summary { cursor: pointer; color: #444; }
#advise { display: grid; gap: .4em 1em; margin: .5em 0;
          grid-template-columns: repeat(auto-fill, minmax(10.5em, 1fr)); }
#advise label { display: flex; flex-direction: column; font-size: 13px; color: #444; }
#advise input, #advise select { font-size: 16px; padding: .15em .25em; width: 100%;
                                box-sizing: border-box; }
table.answer td.stack { overflow-wrap: break-word; border-left: 5px solid NONE; }
ROWS
#advise-warn { color: #8a4b00; padding-left: 1.2em; }
#advise-warn:empty, #advise-said:empty { display: none; }
ol.notes { list-style: none; padding: 0; font-size: 13px; }
ol.notes li { margin: .3em 0; } ol.notes .said { display: block; padding-left: 1.5em; }
pre { overflow-x: auto; font-size: 12px; }
@media (max-width: 600px) {
  body { margin: .5em auto; font-size: 14px; }
  h1 { font-size: 1.4em; margin: .2em 0; } h2 { font-size: 1.15em; margin: .5em 0 .3em; }
  #advise { grid-template-columns: 1fr 1fr; }
  table.answer { font-size: 12px; } table.answer td, table.answer th { padding: .2em .3em; }
}
'''.replace('NONE', DATABASES[None]).replace('ROWS', '\n'.join(
    'tr.db-%s td.stack { border-left-color: %s; }' % (k, c)
    for k, c in DATABASES.items() if k))
IMAGE = re.compile(r'!\[([^\]]*)\]\(([^)]+)\)')


def inline(text, folder):
    """One line of markdown as HTML: all of it escaped, quotes too, before
    code, bold and the pictures (which image() escapes again) are made."""
    text = html.escape(text, quote=True)
    text = re.sub(r'`([^`]+)`', r'<code>\1</code>', text)
    text = re.sub(r'\*\*([^*]+)\*\*', r'<b>\1</b>', text)
    return IMAGE.sub(lambda m: image(html.unescape(m.group(1)),
                                     html.unescape(m.group(2)), folder), text)


def table(lines, folder):
    rows = [[c.strip() for c in line.strip().strip('|').split('|')] for line in lines]
    align = ['n' if c.endswith(':') else '' for c in rows[1]] if len(rows) > 1 else []
    out = ['<div class="scroll"><table>', '<tr>%s</tr>' % ''.join(
        '<th>%s</th>' % inline(c, folder) for c in rows[0])]
    for r in rows[2:]:
        out.append('<tr>%s</tr>' % ''.join(
            '<td class="%s">%s</td>' % (align[i] if i < len(align) else '',
                                        inline(c, folder)) for i, c in enumerate(r)))
    return out + ['</table></div>']


def blocks(lines, folder):
    """Markdown's tables, lists, headings and paragraphs as HTML lines."""
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        if line.startswith('|'):
            block = []
            while i < len(lines) and lines[i].startswith('|'):
                block.append(lines[i])
                i += 1
            out += table(block, folder)
            continue
        if line.startswith('- '):
            out.append('<ul>')
            while i < len(lines) and lines[i].startswith('- '):
                out.append('<li>%s</li>' % inline(lines[i][2:], folder))
                i += 1
            out.append('</ul>')
            continue
        heading = re.match(r'(#{1,4}) (.*)', line)
        if heading:
            level = len(heading.group(1))
            out.append('<h%d>%s</h%d>' % (level, inline(heading.group(2), folder), level))
        elif line.strip():
            out.append('<p>%s</p>' % inline(line, folder))
        i += 1
    return out


def render(markdown, folder, title='Benchmark results', results=None):
    """The page: its title, then (for a latency run) the answer first, the
    run's metadata folded, then the sections of results.md."""
    out = ['<!DOCTYPE html>', '<html lang="en"><head><meta charset="utf-8">'
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           '<title>%s</title><style>%s</style></head><body>' % (
               html.escape(title), STYLE)]
    lines = markdown.splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith('## ')),
                 len(lines))
    head, body = lines[:first], lines[first:]
    top = [line for line in head if line.startswith('# ')][:1]
    out += blocks(top, folder)
    out += answer.section(results, folder) if results else []
    rest = [line for line in head if line not in top]
    if any(line.strip() for line in rest):
        out += ['<details><summary>The run: when, commit, machine, versions, '
                'load</summary>'] + blocks(rest, folder) + ['</details>']
    out += blocks(body, folder)
    return once('\n'.join(out + ['</body></html>', '']))


PICTURE = re.compile(r'<img alt="([^"]*)" src="(data:image/png;base64,[^"]+)">')


def once(page):
    """Each picture embedded once: a chart shown again (the answer's
    capacity chart, in its section too) links to where it was shown."""
    first = {}

    def one(m):
        if m.group(2) in first:
            return '<a href="#%s">(%s: the chart above)</a>' % (first[m.group(2)],
                                                               m.group(1))
        first[m.group(2)] = 'chart-%d' % len(first)
        return '<img id="%s" alt="%s" src="%s">' % (first[m.group(2)], m.group(1),
                                                    m.group(2))
    return PICTURE.sub(one, page)


def write(out):
    """results.html beside results.md in folder out (results.json, when
    there, gives the page its answer first); its path."""
    from . import results_file
    with open(os.path.join(out, 'results.md')) as f:
        text = f.read()
    results = None
    try:
        results = results_file.load(out)
    except (OSError, ValueError, EOFError):
        pass
    path = os.path.join(out, 'results.html')
    with open(path, 'w') as f:
        f.write(render(text, out, results=results))
    return path
