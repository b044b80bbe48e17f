"""The HTML of the pages that list stickers, rendered in parts.

Jinja renders a page's frame (layout, heading, navigation) once per kind of
page, and card.html / contender.html once per sticker, with markers where
the values of a request go (its place, rating, votes, ballots). Each
request then only formats those values into the stored parts: the parts that
never change (a sticker's image URL, its pack's name and title) are escaped
once, and no template runs per request. tests/test_render.py holds the
parts to what Jinja renders with the values themselves.
"""
import jinja2
from markupsafe import Markup

from settings import DEFAULTS

TEMPLATES = jinja2.Environment(
    loader=jinja2.FileSystemLoader(DEFAULTS.templates),
    autoescape=True)
MARK = '\x00%s\x00'
EMPTY_LIST = '  <li class="empty">No stickers have been rated yet.</li>'
VERSUS = '\n  <div class="vs" aria-hidden="true">vs</div>\n'
# Beyond this many stickers' parts kept, they are rendered anew.
MAX_KEPT = 100000


def tone(rating):
    return 'pos' if rating > 0 else 'neg' if rating < 0 else 'zero'


def signed(rating):
    """As a card shows a rating: +3, -2, 0."""
    return '+%d' % rating if rating > 0 else str(rating)


def shown(rating):
    """As a contender shows a rating: +3, −2 (a minus sign), 0."""
    return ('+%d' if rating > 0 else '\u2212%d' if rating < 0 else '%d') % abs(
        rating)


def card_values(place, s):
    return {'place': place, 'tone': tone(s.rating), 'signed': signed(s.rating),
            'votes_plus': s.votes_plus, 'votes_minus': s.votes_minus}


def contender_values(s, win, lose):
    return {'win': win, 'lose': lose, 'shown': shown(s.rating)}


class Part:
    """A template rendered for one sticker with markers for `fields`, kept
    as a %-format by the sticker's fixed values (a sticker changed by a new
    data set gets a new one): format % values gives what the template
    renders."""

    def __init__(self, template, fields):
        self.template = TEMPLATES.get_template(template)
        self.fields = fields
        self.kept = {}

    def render(self, s, values):
        """The template for sticker `s` (a data_interface.Sticker) with these
        values (a dict of `fields`)."""
        key = (s.id, s.pack, s.image, s.pack_title)
        fmt = self.kept.get(key)
        if fmt is None:
            fmt = self._compile(s, key)
            if fmt is None:      # a marker in its text: render as it is
                return self.direct(s, values)
        return fmt % values

    def direct(self, s, values):
        """What Jinja renders, no parts kept."""
        marked = {f: v for f, v in values.items()
                  if f not in ('votes_plus', 'votes_minus')}
        return self.template.render(s=s, **marked)

    def _compile(self, s, key):
        if any('\x00' in str(v) for v in s):
            return None
        marks = {f: MARK % i for i, f in enumerate(self.fields)}
        marked = s._replace(votes_plus=marks.get('votes_plus', s.votes_plus),
                            votes_minus=marks.get('votes_minus',
                                                  s.votes_minus))
        text = self.template.render(s=marked, **marks)
        fmt = text.replace('%', '%%')
        for i, field in enumerate(self.fields):
            fmt = fmt.replace(MARK % i, '%%(%s)s' % field)
        if len(self.kept) >= MAX_KEPT:
            self.kept.clear()
        self.kept[key] = fmt
        return fmt


class Frame:
    """A page template rendered once with a marker for its list; the body of
    a request is the part before, the list, and the part after, in UTF-8."""

    def __init__(self, template, hole, **context):
        text = TEMPLATES.get_template(template).render(
            **dict(context, **{hole: Markup(MARK % hole)}))
        before, after = text.split(MARK % hole)
        self.before, self.after = before.encode(), after.encode()

    def body(self, middle):
        return b''.join((self.before, middle.encode(), self.after))


CARD = Part('card.html', ('place', 'tone', 'signed', 'votes_plus',
                          'votes_minus'))
CONTENDER = Part('contender.html', ('win', 'lose', 'shown'))


def cards(stickers):
    """The <li> cards of a ranked list, numbered from 1."""
    if not stickers:
        return EMPTY_LIST
    return '\n'.join([CARD.render(s, card_values(place, s))
                      for place, s in enumerate(stickers, 1)])


def duel(a, b, tokens):
    """The two contender forms: each wins with its own ballot."""
    return VERSUS.join((
        CONTENDER.render(a, contender_values(a, tokens[0], tokens[1])),
        CONTENDER.render(b, contender_values(b, tokens[1], tokens[0]))))
