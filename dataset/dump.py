"""Import a real sticker dump (JSON) as a DataSet.

The format::

    {"packs": [
        {"name": "grumpy_cats",              # URL-safe slug, unique
         "title": "Grumpy Cats",             # optional, defaults to name
         "stickers": [                       # at least one
             {"image": "https://cdn.example.org/grumpy_cats/1.webp",
              "rating": 3},                  # optional integer, default 0
             {"image": "/img/grumpy_cats/2.webp"}
         ]},
        ...
    ]}

A name is 1..64 of a-z, 0-9 and `_`. An image is a non-empty URL with an
http:// or https:// scheme and a host, or a path starting with `/`. Other
keys are ignored. Sticker ids are assigned 1..N in file order and votes are
derived from the rating (votes_plus = max(rating, 0), votes_minus =
max(-rating, 0)). Anything else raises DumpError naming the file, the pack
(packs[i], with its name once known) and the sticker (stickers[j]).
"""
import json
import re

from .model import PackRow, StickerRow, DataSet, votes_for

SLUG = re.compile(r'[a-z0-9_]{1,64}\Z')
URL = re.compile(r'(https?://[^/\s?#]+|/)\S*\Z')


class DumpError(ValueError):
    """A dump file that cannot be read or is not in the expected format."""


def _kind(value):
    return {dict: 'an object', list: 'a list', str: 'a string',
            bool: 'a boolean', int: 'an integer', float: 'a number',
            type(None): 'null'}.get(type(value), type(value).__name__)


def read_dump(path):
    """DataSet from the JSON dump at `path` (format: see module docstring)."""
    try:
        with open(path, 'rb') as f:
            raw = f.read()
    except (IOError, OSError) as e:
        raise DumpError('%s: cannot read: %s' % (path, e.strerror or e))
    try:
        doc = json.loads(raw.decode('utf-8'))
    except UnicodeDecodeError as e:
        raise DumpError('%s: not UTF-8 text: %s' % (path, e))
    except ValueError as e:
        raise DumpError('%s: not valid JSON: %s' % (path, e))
    return parse_dump(doc, path)


def parse_dump(doc, where='dump'):
    """DataSet from an already decoded dump document."""
    def fail(message):
        raise DumpError('%s: %s' % (where, message))

    if not isinstance(doc, dict):
        fail('expected an object with a "packs" list at the top, got %s'
             % _kind(doc))
    packs = doc.get('packs')
    if not isinstance(packs, list):
        fail('"packs" must be a list, got %s' % (
            'nothing' if 'packs' not in doc else _kind(packs)))
    pack_rows, stickers, seen = [], [], {}
    for i, pack in enumerate(packs):
        at = 'packs[%d]' % i
        if not isinstance(pack, dict):
            fail('%s must be an object, got %s' % (at, _kind(pack)))
        name = pack.get('name')
        if not isinstance(name, str):
            fail('%s: "name" must be a string, got %s' % (
                at, 'nothing' if 'name' not in pack else _kind(name)))
        if not SLUG.match(name):
            fail('%s: name %r is not a URL-safe slug (1..64 of a-z, 0-9, _)'
                 % (at, name))
        if name in seen:
            fail('%s: name %r is already used by packs[%d]'
                 % (at, name, seen[name]))
        seen[name] = i
        at = '%s %r' % (at, name)
        title = pack.get('title', name)
        if not isinstance(title, str) or not title.strip():
            fail('%s: "title" must be a non-empty string, got %s'
                 % (at, _kind(title) if not isinstance(title, str)
                    else 'an empty one'))
        items = pack.get('stickers')
        if not isinstance(items, list):
            fail('%s: "stickers" must be a list, got %s' % (
                at, 'nothing' if 'stickers' not in pack else _kind(items)))
        if not items:
            fail('%s: "stickers" is empty' % at)
        pack_rows.append(PackRow(name, title.strip()))
        for j, item in enumerate(items):
            st = '%s: stickers[%d]' % (at, j)
            if not isinstance(item, dict):
                fail('%s must be an object, got %s' % (st, _kind(item)))
            image = item.get('image')
            if not isinstance(image, str) or not image:
                fail('%s: "image" must be a non-empty string, got %s' % (
                    st, 'nothing' if 'image' not in item else
                    'an empty one' if image == '' else _kind(image)))
            if not URL.match(image):
                fail('%s: image %r is neither an http(s) URL nor a path '
                     'starting with /' % (st, image))
            rating = item.get('rating', 0)
            if isinstance(rating, bool) or not isinstance(rating, int):
                fail('%s: "rating" must be an integer, got %s %s' % (
                    st, _kind(rating), json.dumps(rating)))
            plus, minus = votes_for(rating)
            stickers.append(StickerRow(len(stickers) + 1, name, image,
                                       rating, plus, minus))
    return DataSet(pack_rows, stickers)
