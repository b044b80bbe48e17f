"""The HTML of the pages that list stickers, rendered in parts.

Jinja renders a page's frame (layout, heading, navigation) once per kind of
page, and card.html / contender.html once per sticker, with markers where
the values of a request go (its place, rating, votes, ballots). Each
request then only formats those values into the stored parts: the parts that
never change (a sticker's image URL, its pack's name and title) are escaped
once, and no template runs per request. Parts are UTF-8 bytes formats: a
page is never built as text and encoded. tests/test_render.py holds the
parts to what Jinja renders with the values themselves.
"""
import functools
import re

import jinja2
from markupsafe import Markup

MARK = '\x00%s\x00'
MARKS = re.compile(b'\x00([a-z_]+)\x00')
EMPTY_LIST = b'  <li class="empty">No stickers have been rated yet.</li>'
VERSUS = b'\n  <div class="vs" aria-hidden="true">vs</div>\n'
# Beyond this many stickers' parts kept, they are rendered anew.
MAX_KEPT = 100000
# A card's rating: (class, as shown) by its sign.
TONES = {1: (b'pos', b'+%d'), -1: (b'neg', b'%d'), 0: (b'zero', b'%d')}


def card_values(place, s):
    """The values of card.html's markers, in the order they come."""
    r = s.rating
    tone, shown = TONES[(r > 0) - (r < 0)]
    return place, place, tone, shown % r, s.votes_plus, s.votes_minus


def contender_values(s, win, lose):
    """The values of contender.html's markers, in the order they come."""
    r = s.rating
    shown = b'+%d' % r if r > 0 else b'\xe2\x88\x92%d' % -r if r < 0 else b'0'
    return win.encode(), lose.encode(), shown


class Part:
    """A template rendered for one sticker with markers in place of
    `fields` (named in the order they come, a repeated one again each
    time), kept as a bytes %-format by the sticker's fixed values (a sticker
    that changes gets a new one): format % values is what the template
    renders, in UTF-8. `numbers`: the fields given as integers."""

    def __init__(self, templates, template, fields, numbers=()):
        self.template = templates.get_template(template)
        self.fields = fields
        self.numbers = numbers
        self.kept = {}

    def render(self, s, values):
        """The template for sticker `s` (a data_interface.Sticker) with
        these values (as card_values or contender_values give them)."""
        key = (s.id, s.pack, s.image, s.pack_title)
        fmt = self.kept.get(key)
        if fmt is None:
            fmt = self._compile(s, key)
            if fmt is None:      # a marker in its text: render as it is
                return self.direct(s, values).encode()
        return fmt % values

    def direct(self, s, values):
        """What Jinja renders, as text, no parts kept."""
        named = {}
        for field, value in zip(self.fields, values):
            named[field] = value.decode() if isinstance(value, bytes) else value
        plain = {f: v for f, v in named.items()
                 if f not in ('votes_plus', 'votes_minus')}
        shown = s._replace(votes_plus=named.get('votes_plus', s.votes_plus),
                           votes_minus=named.get('votes_minus', s.votes_minus))
        return self.template.render(s=shown, **plain)

    def _compile(self, s, key):
        if any('\x00' in str(v) for v in s):
            return None
        marks = {f: MARK % f for f in self.fields}
        marked = s._replace(votes_plus=marks.get('votes_plus', s.votes_plus),
                            votes_minus=marks.get('votes_minus',
                                                  s.votes_minus))
        plain = {f: m for f, m in marks.items()
                 if f not in ('votes_plus', 'votes_minus')}
        text = self.template.render(s=marked, **plain).encode()
        found = tuple(m.decode() for m in MARKS.findall(text))
        if found != tuple(self.fields):
            raise ValueError('%s has its values in the order %r, not %r'
                             % (self.template.name, found, self.fields))
        fmt = MARKS.sub(lambda m: b'%d' if m.group(1).decode() in self.numbers
                        else b'%s', text.replace(b'%', b'%%'))
        if len(self.kept) >= MAX_KEPT:
            self.kept.clear()
        self.kept[key] = fmt
        return fmt


class Frame:
    """A page template rendered once with a marker for its list; the body of
    a request is the part before, the list, and the part after."""

    def __init__(self, templates, template, hole, **context):
        text = templates.get_template(template).render(
            **dict(context, **{hole: Markup(MARK % hole)}))
        before, after = text.encode().split((MARK % hole).encode())
        self.before, self.after = before, after

    def body(self, middle):
        return b''.join((self.before, middle, self.after))


@functools.lru_cache(maxsize=None)
def environment(directory):
    """The Jinja2 templates of a directory, compiled once, autoescaped, and
    not looked at again (no stat per page: a changed template needs a
    restart)."""
    return jinja2.Environment(loader=jinja2.FileSystemLoader(directory),
                              autoescape=True, auto_reload=False)


class Renderer:
    """The site's templates from one directory: whole pages, frames, and the
    stickers' parts."""

    def __init__(self, directory):
        self.templates = environment(directory)
        self.card = Part(self.templates, 'card.html', (
            'place', 'place', 'tone', 'signed', 'votes_plus', 'votes_minus'),
            numbers=('place', 'votes_plus', 'votes_minus'))
        self.contender = Part(self.templates, 'contender.html',
                              ('win', 'lose', 'shown'))

    def page(self, template, **context):
        """A template rendered whole, as text."""
        return self.templates.get_template(template).render(**context)

    def frame(self, template, hole, **context):
        return Frame(self.templates, template, hole, **context)

    def cards(self, stickers):
        """The <li> cards of a ranked list, numbered from 1, in UTF-8."""
        if not stickers:
            return EMPTY_LIST
        render = self.card.render
        return b'\n'.join([render(s, card_values(place, s))
                           for place, s in enumerate(stickers, 1)])

    def duel(self, a, b, tokens):
        """The two contender forms, in UTF-8: each wins with its own
        ballot."""
        render = self.contender.render
        return VERSUS.join((
            render(a, contender_values(a, tokens[0], tokens[1])),
            render(b, contender_values(b, tokens[1], tokens[0]))))
