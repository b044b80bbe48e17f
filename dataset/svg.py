"""Sticker pictures: small SVG critters, a pure function of (seed, pack, n).

A pack has a theme drawn from its name (adjective -> mood, noun -> species,
see dataset.words) and from the seed: body shape, what grows on the head,
colours. Each sticker of the pack gets its own face and accessory (no two
alike within a pack), a colour shift, a tilt and a glance. Every picture is a
512x512 SVG with a white sticker outline and a soft shadow, no scripts and no
external references, about 2 KB.
"""
import colorsys
import functools
import hashlib
import math
import os
import random
import re
from xml.sax.saxutils import escape

from .generate import generate
from .words import ADJECTIVES, NOUNS, NOUN_LIST

CX, CY, R = 256, 296, 140
DARK = '#3b2b36'
PINK = '#ff8fab'
RED = '#ff4d6d'
GOLD = '#ffc93c'
WHITE = '#fff'
ROUND = ' stroke-linecap="round" stroke-linejoin="round"'

EYES = ('dot', 'shiny', 'happy', 'sleepy', 'wink', 'heart', 'star', 'dizzy',
        'angry')
MOUTHS = ('smile', 'grin', 'cat', 'frown', 'o', 'flat', 'tongue', 'fang',
          'wavy')
ACCESSORIES = ('none', 'bow', 'party', 'crown', 'flower', 'glasses', 'sweat',
               'hearts', 'sparkles', 'beanie')
# mood -> (eyes it likes, mouths it likes, chance of blush)
MOODS = {
    'happy': (('dot', 'shiny', 'happy', 'star'), ('smile', 'grin', 'cat'), .6),
    'silly': (('wink', 'dizzy', 'star'), ('tongue', 'grin', 'wavy'), .5),
    'sleepy': (('sleepy', 'happy'), ('o', 'flat', 'smile'), .5),
    'grumpy': (('angry', 'sleepy', 'dot'), ('frown', 'flat', 'wavy'), .2),
    'shy': (('shiny', 'happy', 'dot'), ('cat', 'wavy', 'smile'), .95),
    'love': (('heart', 'shiny', 'happy'), ('smile', 'cat', 'grin'), .8),
    'spooky': (('shiny', 'dot', 'angry'), ('fang', 'o', 'grin'), .3),
}
MOOD_OF = dict(ADJECTIVES)


def n(x):
    return '%d' % round(x)


def hsl(h, s, l):
    r, g, b = colorsys.hls_to_rgb((h % 360) / 360.0, min(max(l, 0), 1),
                                  min(max(s, 0), 1))
    return '#%02x%02x%02x' % (round(r * 255), round(g * 255), round(b * 255))


def path(points, close=True):
    d = 'M' + ' '.join('%s %s' % (n(x), n(y)) for x, y in points)
    return d + ('Z' if close else '')


def mirror(points):
    return [(2 * CX - x, y) for x, y in points]


def heart_d(x, y, s):
    """A heart about 2s wide centred on (x, y)."""
    return 'M%s %sC%s %s %s %s %s %sC%s %s %s %s %s %sZ' % tuple(map(n, (
        x, y + .8 * s, x - 1.3 * s, y - .1 * s, x - .8 * s, y - 1.2 * s,
        x, y - .45 * s, x + .8 * s, y - 1.2 * s, x + 1.3 * s, y - .1 * s,
        x, y + .8 * s)))


def star_d(x, y, outer, inner, points=5, soft=False):
    """A star; soft=True rounds its tips into a puffy shape."""
    pts = []
    for i in range(points * 2):
        a = math.pi * i / points - math.pi / 2
        r = outer if i % 2 == 0 else inner
        pts.append((x + r * math.cos(a), y + r * math.sin(a)))
    if not soft:
        return path(pts)
    d = 'M%s %s' % (n(pts[1][0]), n(pts[1][1]))
    for i in range(1, points * 2, 2):
        tip, nxt = pts[(i + 1) % len(pts)], pts[(i + 2) % len(pts)]
        d += 'Q%s %s %s %s' % (n(tip[0]), n(tip[1]), n(nxt[0]), n(nxt[1]))
    return d + 'Z'


def blob_d(rng, x, y, r, k=9):
    """A smooth closed blob around (x, y), radius r give or take 8%."""
    pts = []
    for i in range(k):
        a = 2 * math.pi * i / k
        rr = r * rng.uniform(.93, 1.07)
        pts.append((x + rr * math.cos(a), y + rr * math.sin(a) * .95))
    mids = [((pts[i][0] + pts[i - 1][0]) / 2, (pts[i][1] + pts[i - 1][1]) / 2)
            for i in range(k)]
    d = 'M%s %s' % (n(mids[0][0]), n(mids[0][1]))
    for i in range(k):
        p, m = pts[i], mids[(i + 1) % k]
        d += 'Q%s %s %s %s' % (n(p[0]), n(p[1]), n(m[0]), n(m[1]))
    return d + 'Z'


def derive(*parts):
    """A 64-bit seed from values (stable across Python versions)."""
    text = '\x1f'.join(str(p) for p in parts).encode('utf-8')
    return int.from_bytes(hashlib.sha256(text).digest()[:8], 'big')


class Theme(object):
    """What all stickers of a pack share."""

    def __init__(self, seed, pack):
        rng = random.Random(derive(seed, pack))
        base = re.sub(r'_\d+$', '', pack)
        adj, _, noun = base.partition('_')
        mood = MOOD_OF.get(adj) or rng.choice(sorted(MOODS))
        if noun not in NOUNS:
            noun = rng.choice(NOUN_LIST)
        shapes, ears, colour, extras = NOUNS[noun]
        self.mood, self.noun, self.extras = mood, noun, extras
        self.shape = rng.choice(shapes)
        self.ears = rng.choice(ears)
        if colour is None:
            self.hue, self.sat = rng.uniform(0, 360), rng.uniform(.55, .8)
            self.light = rng.uniform(.62, .74)
        else:
            lo, hi, self.sat, self.light = colour
            self.hue = rng.uniform(lo, hi)
        self.accent_hue = self.hue + rng.uniform(120, 240)
        eyes, mouths, self.blush = MOODS[mood]
        combos = [(e, m, a) for e in EYES for m in MOUTHS for a in ACCESSORIES]
        rng.shuffle(combos)
        liked = [c for c in combos if c[0] in eyes and c[1] in mouths]
        other = [c for c in combos if not (c[0] in eyes and c[1] in mouths)]
        # every combination once: about 45% from the ones the mood likes
        liked.reverse()         # so that pop() takes them in shuffled order
        other.reverse()
        self.combos = []
        while liked or other:
            take = liked and (rng.random() < .45 or not other)
            self.combos.append((liked if take else other).pop())


@functools.lru_cache(maxsize=1024)
def theme(seed, pack):
    return Theme(seed, pack)


class Drawing(object):
    """Collects the parts of one sticker.

    Parts that stick out of the body go into the silhouette too (by id), so
    the white outline and the shadow go around them.
    """

    def __init__(self):
        self.sil, self.out, self.ids = [], [], 0

    def add(self, text):
        self.out.append(text)

    def ident(self):
        """A fresh id for a part (lowercase; F and S are taken)."""
        self.ids += 1
        return 'abcdefghijklmnopqrstuvwxyz'[self.ids - 1]

    def solid(self, tag, geometry, paint):
        """A part of the silhouette, drawn with `paint`."""
        ident = self.ident()
        self.sil.append('<%s id="%s" %s/>' % (tag, ident, geometry))
        self.out.append('<use href="#%s" %s/>' % (ident, paint))

    def svg(self, title, angle):
        return (
            '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 512 512" '
            'width="512" height="512"><title>%s</title><defs><filter id="F" '
            'x="-25%%" y="-25%%" width="150%%" height="150%%"><feGaussianBlur '
            'stdDeviation="7"/></filter><g id="S">%s</g></defs>'
            '<g transform="rotate(%s 256 300)"%s><g stroke-width="34">'
            '<use href="#S" transform="translate(5 10)" opacity=".22" '
            'filter="url(#F)"/><use href="#S" fill="#fff" stroke="#fff"/></g>'
            '%s</g></svg>' % (escape(title), ''.join(self.sil), angle, ROUND,
                              ''.join(self.out)))


def fill(colour, line=None, width=8):
    if line is None:
        return 'fill="%s"' % colour
    return 'fill="%s" stroke="%s" stroke-width="%d"' % (colour, line, width)


def line(colour=DARK, width=8):
    return 'fill="none" stroke="%s" stroke-width="%d"' % (colour, width)


def body(rng, shape):
    """((tag, geometry) of the body, its top y in the middle, face y)."""
    if shape == 'round':
        return ('circle', 'cx="%d" cy="%d" r="%d"' % (CX, CY, R)), CY - R, CY
    if shape == 'egg':
        return (('ellipse', 'cx="%d" cy="%d" rx="%s" ry="%s"' % (
            CX, CY - 6, n(.86 * R), n(1.05 * R))), CY - 6 - 1.05 * R, CY + 6)
    if shape == 'mochi':
        return (('ellipse', 'cx="%d" cy="%d" rx="%s" ry="%s"' % (
            CX, CY + 26, n(1.14 * R), n(.84 * R))), CY + 26 - .84 * R, CY + 34)
    if shape == 'square':
        return (('rect', 'x="%d" y="%s" width="%d" height="%s" rx="%s"' % (
            CX - R, n(CY - .95 * R), 2 * R, n(1.9 * R), n(.42 * R))),
            CY - .95 * R, CY + 8)
    if shape == 'star':
        return (('path', 'd="%s"' % star_d(CX, CY + 14, 1.5 * R, .8 * R,
                                          soft=True)), CY - .75 * R, CY + 22)
    if shape == 'heart':
        return (('path', 'd="%s"' % heart_d(CX, CY - 10, 1.35 * R)),
                CY - .7 * R, CY + 6)
    if shape == 'ghost':
        w = R / 2.0
        dd = 'M%d %sV%dA%d %d 0 0 1 %d %dV%s' % (
            CX - R, n(CY + .9 * R), CY, R, R, CX + R, CY, n(CY + .9 * R))
        dd += 'q-%s %s -%s 0' % (n(w / 2), n(.4 * w), n(w)) * 4
        return ('path', 'd="%sZ"' % dd), CY - R, CY + 4
    # blob
    blob = blob_d(rng, CX, CY + 4, 1.02 * R)
    return ('path', 'd="%s"' % blob), CY - R, CY + 8


def ears(d, kind, top, wide, colour, shade, inner, accent):
    """What grows on the head, drawn behind the body."""
    ox = R * (.72 if wide else .6)
    paint = fill(colour, shade)
    for side in (1, -1):
        def m(pts):
            return pts if side == 1 else mirror(pts)
        x = CX - ox
        if kind == 'cat':
            outer = [(x - 48, top + 78), (x - 30, top - 42),
                     (x + 50, top + 30)]
            cx = sum(p[0] for p in outer) / 3.0
            cy = sum(p[1] for p in outer) / 3.0
            d.solid('path', 'd="%s"' % path(m(outer)), paint)
            d.add('<path d="%s" %s/>' % (path(m([
                (cx + (px - cx) * .5, cy + (py - cy) * .5 + 4)
                for px, py in outer])), fill(inner)))
        elif kind in ('bear', 'mouse'):
            r = R * (.3 if kind == 'bear' else .42)
            ex = CX - side * ox * (1.05 if kind == 'bear' else 1.15)
            ey = top + (28 if kind == 'bear' else 22)
            d.solid('circle', 'cx="%s" cy="%s" r="%s"' % (n(ex), n(ey), n(r)),
                    paint)
            d.add('<circle cx="%s" cy="%s" r="%s" %s/>' % (
                n(ex), n(ey), n(r * .58), fill(inner)))
        elif kind == 'bunny':
            ex, ey = CX - side * R * .36, top - 52
            rot = 'transform="rotate(%d %s %s)"' % (-side * 12, n(ex), n(ey))
            d.solid('ellipse', 'cx="%s" cy="%s" rx="%s" ry="%s" %s' % (
                n(ex), n(ey), n(.2 * R), n(.58 * R), rot), paint)
            d.add('<ellipse cx="%s" cy="%s" rx="%s" ry="%s" %s %s/>' % (
                n(ex), n(ey + 8), n(.1 * R), n(.42 * R), rot, fill(inner)))
        elif kind == 'horns':
            pts = [(x + 8, top + 34), (x - 40, top - 8), (x - 26, top - 66),
                   (x + 2, top - 18), (x + 48, top + 16)]
            dd = 'M%s %sQ%s %s %s %sQ%s %s %s %sZ' % tuple(
                n(v) for p in m(pts) for v in p)
            d.solid('path', 'd="%s"' % dd, fill('#fff4d6', '#e3c58f'))
        elif kind == 'antennae':
            bx, by, tx, ty = CX - side * 32, top + 14, CX - side * 66, top - 64
            d.solid('path', 'd="%s"' % path([
                (bx - 5, by), (tx - 4, ty), (tx + 4, ty), (bx + 5, by)]),
                fill(shade, shade, 4))
            d.solid('circle', 'cx="%s" cy="%s" r="18"' % (n(tx), n(ty)),
                    fill(accent, shade, 6))
        elif kind == 'frog':
            d.solid('circle', 'cx="%s" cy="%s" r="%s"' % (
                n(CX - side * R * .5), n(top + 10), n(R * .34)), paint)
        elif kind == 'gills':
            for k, a in enumerate((-62, -30, 2)):
                gx, gy = CX - side * (R * .8 + 6 * k), CY - R * .5 + 30 * k
                d.solid('ellipse', 'cx="%s" cy="%s" rx="13" ry="40" '
                        'transform="rotate(%d %s %s)"' % (
                            n(gx), n(gy - 34), side * a, n(gx), n(gy)),
                        fill(shade, shade, 6))
        elif kind == 'spikes':
            if side == 1:
                for k in (-1, 0, 1):
                    sx = CX + k * 50
                    sy = top + 10 + 12 * abs(k)
                    d.solid('path', 'd="%s"' % path([
                        (sx - 24, sy + 14), (sx, sy - 34 + 10 * abs(k)),
                        (sx + 24, sy + 14)]), fill(accent, accent, 10))
        elif kind == 'tuft':
            if side == 1:
                for k in (-1, 0, 1):
                    d.solid('ellipse', 'cx="%d" cy="%s" rx="9" ry="24" '
                            'transform="rotate(%d %d %s)"' % (
                                CX + 14 * k, n(top - 14), 22 * k, CX,
                                n(top + 8)), fill(shade))
        elif kind == 'sprout':
            if side == 1:
                d.solid('path', 'd="%s"' % path([
                    (CX - 4, top + 8), (CX - 4, top - 34), (CX + 4, top - 34),
                    (CX + 4, top + 8)]), fill('#5aa83c'))
                for s in (1, -1):
                    d.solid('ellipse', 'cx="%d" cy="%s" rx="26" ry="13" '
                            'transform="rotate(%d %d %s)"' % (
                                CX - s * 24, n(top - 40), s * 25, CX,
                                n(top - 34)), fill('#7ccf55', '#5aa83c', 5))
# 'none' and 'floppy' (drawn in front of the body) add nothing here


def eye(d, kind, x, y, s, side):
    """One eye at (x, y), side -1 left / 1 right."""
    def dots(big):
        if big:
            d.add('<ellipse cx="%s" cy="%s" rx="%s" ry="%s" %s/><circle '
                  'cx="%s" cy="%s" r="%s" %s/><circle cx="%s" cy="%s" r="%s" '
                  '%s/>' % (n(x), n(y), n(20 * s), n(25 * s), fill(DARK),
                            n(x + 7 * s), n(y - 9 * s), n(8 * s), fill(WHITE),
                            n(x - 6 * s), n(y + 9 * s), n(3.5 * s),
                            fill(WHITE)))
        else:
            d.add('<ellipse cx="%s" cy="%s" rx="%s" ry="%s" %s/><circle '
                  'cx="%s" cy="%s" r="%s" %s/>' % (
                      n(x), n(y), n(12 * s), n(16 * s), fill(DARK),
                      n(x + 4 * s), n(y - 6 * s), n(4.5 * s), fill(WHITE)))

    def arc(up):
        k = -22 if up else 14
        d.add('<path d="M%s %sQ%s %s %s %s" %s/>' % (
            n(x - 17 * s), n(y + 4), n(x), n(y + k * s), n(x + 17 * s),
            n(y + 4), line()))

    if kind == 'dot':
        dots(False)
    elif kind == 'shiny':
        dots(True)
    elif kind == 'happy':
        arc(True)
    elif kind == 'sleepy':
        arc(False)
    elif kind == 'wink':
        if side < 0:
            dots(True)
        else:
            arc(True)
    elif kind == 'heart':
        d.add('<path d="%s" %s/>' % (heart_d(x, y, 19 * s), fill(RED)))
    elif kind == 'star':
        d.add('<path d="%s" %s/>' % (star_d(x, y, 22 * s, 10 * s),
                                     fill(DARK, DARK, 4)))
    elif kind == 'dizzy':
        a = 12 * s
        d.add('<path d="M%s %sL%s %sM%s %sL%s %s" %s/>' % (
            n(x - a), n(y - a), n(x + a), n(y + a), n(x + a), n(y - a),
            n(x - a), n(y + a), line()))
    elif kind == 'angry':
        dots(False)
        d.add('<path d="M%s %sL%s %s" %s/>' % (
            n(x + side * 20), n(y - 36), n(x - side * 14), n(y - 24), line()))


def mouth(d, kind, x, y):
    if kind == 'smile':
        d.add('<path d="M%d %dQ%d %d %d %d" %s/>' % (
            x - 22, y, x, y + 22, x + 22, y, line()))
    elif kind == 'grin':
        d.add('<path d="M%d %dQ%d %d %d %dZ" %s/><ellipse cx="%d" cy="%d" '
              'rx="11" ry="6" %s/>' % (x - 28, y - 4, x, y + 44, x + 28, y - 4,
                                       fill(DARK, DARK, 5), x, y + 12,
                                       fill(PINK)))
    elif kind == 'cat':
        d.add('<path d="M%d %dQ%d %d %d %dQ%d %d %d %d" %s/>' % (
            x - 24, y, x - 12, y + 16, x, y, x + 12, y + 16, x + 24, y,
            line(width=7)))
    elif kind == 'frown':
        d.add('<path d="M%d %dQ%d %d %d %d" %s/>' % (
            x - 20, y + 12, x, y - 8, x + 20, y + 12, line()))
    elif kind == 'o':
        d.add('<ellipse cx="%d" cy="%d" rx="11" ry="14" %s/>' % (
            x, y + 6, fill(DARK)))
    elif kind == 'flat':
        d.add('<path d="M%d %dH%d" %s/>' % (x - 16, y + 6, x + 16, line()))
    elif kind == 'tongue':
        d.add('<path d="M%d %dv12a10 10 0 0 0 20 0v-12Z" %s/>' % (
            x + 1, y + 8, fill(PINK, DARK, 5)))
        d.add('<path d="M%d %dQ%d %d %d %d" %s/>' % (
            x - 24, y, x, y + 20, x + 24, y, line()))
    elif kind == 'fang':
        d.add('<path d="M%d %dQ%d %d %d %d" %s/><path d="M%d %dl6 13 6-12Z" '
              '%s/>' % (x - 26, y, x, y + 20, x + 26, y, line(),
                        x - 16, y + 7, fill(WHITE, DARK, 3)))
    elif kind == 'wavy':
        d.add('<path d="M%d %dq6-9 12 0t12 0 12 0 12 0" %s/>' % (
            x - 24, y + 6, line(width=6)))


def accessory(d, kind, top, face_y, es, accent, accent_dark):
    if kind == 'bow':
        x, y = CX + R * .48, top + 22
        d.solid('path', 'd="M%s %sl-36-22v44ZM%s %sl36-22v44Z"' % (
            n(x), n(y), n(x), n(y)), fill(accent, accent, 10))
        d.add('<circle cx="%s" cy="%s" r="11" %s/>' % (
            n(x), n(y), fill(accent_dark)))
    elif kind == 'party':
        d.solid('path', 'd="%s"' % path([(CX - 42, top + 16), (CX + 14,
                                          top - 92), (CX + 42, top + 8)]),
                fill(accent, accent, 6))
        d.add('<circle cx="%d" cy="%s" r="7" %s/><circle cx="%d" cy="%s" '
              'r="6" %s/>' % (CX - 6, n(top - 8), fill(WHITE), CX + 14,
                              n(top - 42), fill(WHITE)))
        d.solid('circle', 'cx="%d" cy="%s" r="14"' % (CX + 14, n(top - 94)),
                fill(GOLD))
    elif kind == 'crown':
        d.solid('path', 'd="%s"' % path([
            (CX - 44, top + 14), (CX + 44, top + 14), (CX + 50, top - 40),
            (CX + 24, top - 12), (CX, top - 50), (CX - 24, top - 12),
            (CX - 50, top - 40)]), fill(GOLD, '#e8a317', 6))
        d.add('<circle cx="%d" cy="%s" r="8" %s/>' % (CX, n(top - 2),
                                                       fill(RED)))
    elif kind == 'flower':
        x, y = CX - R * .58, top + 34
        petals = ''.join('<circle cx="%s" cy="%s" r="15"/>' % (
            n(x + 17 * math.cos(a * math.pi / 2.5)),
            n(y + 17 * math.sin(a * math.pi / 2.5))) for a in range(5))
        ident = d.ident()
        d.sil.append('<g id="%s">%s</g>' % (ident, petals))
        d.add('<use href="#%s" %s/><circle cx="%s" cy="%s" r="10" %s/>' % (
            ident, fill(accent), n(x), n(y), fill(GOLD)))
    elif kind == 'glasses':
        y = face_y - 8
        d.add('<g %s><circle cx="%s" cy="%s" r="31"/><circle cx="%s" '
              'cy="%s" r="31"/><path d="M%s %sq%s -12 %s 0"/></g>' % (
                  line(width=6).replace('fill="none"', 'fill="#fff" '
                                        'fill-opacity=".3"'),
                  n(CX - es), n(y), n(CX + es), n(y), n(CX - es + 31), n(y),
                  n(es - 31), n(2 * es - 62)))
    elif kind == 'sweat':
        x, y = CX + R * .8, CY - R * .55
        d.solid('path', 'd="M%s %sC%s %s %s %s %s %sA16 16 0 0 1 %s %sC%s %s '
                '%s %s %s %sZ"' % (
                    n(x), n(y - 26), n(x + 6), n(y - 12), n(x + 16), n(y - 2),
                    n(x + 16), n(y + 8), n(x - 16), n(y + 8), n(x - 16),
                    n(y - 2), n(x - 6), n(y - 12), n(x), n(y - 26)),
                fill('#8fd3ff'))
        d.add('<circle cx="%s" cy="%s" r="5" %s/>' % (n(x - 6), n(y + 4),
                                                       fill(WHITE)))
    elif kind == 'hearts':
        d.solid('path', 'd="%s%s"' % (
            heart_d(CX + R * 1.05, top + 20, 24),
            heart_d(CX + R * .72, top - 26, 15)), fill(RED))
    elif kind == 'sparkles':
        d.solid('path', 'd="%s%s"' % (
            star_d(CX - R * 1.05, top + 30, 26, 7, points=4),
            star_d(CX + R * 1.08, CY - 10, 18, 5, points=4)),
            fill(GOLD, GOLD, 4))
    elif kind == 'beanie':
        d.solid('path', 'd="M%s %sA%s %s 0 0 1 %s %sZ"' % (
            n(CX - .62 * R), n(top + 40), n(.62 * R), n(.55 * R),
            n(CX + .62 * R), n(top + 40)), fill(accent, accent, 4))
        d.solid('rect', 'x="%s" y="%s" width="%s" height="26" rx="13"' % (
            n(CX - .7 * R), n(top + 26), n(1.4 * R)), fill(accent_dark))
        d.solid('circle', 'cx="%d" cy="%s" r="17"' % (CX, n(top - 44)),
                fill(WHITE, '#e6e6e6', 4))


def sticker_svg(seed, pack, index):
    """The SVG text of sticker number `index` (from 1) of `pack`."""
    th = theme(seed, pack)
    eyes, mouth_kind, acc = th.combos[(index - 1) % len(th.combos)]
    rng = random.Random(derive(seed, pack, index))
    hue = th.hue + rng.uniform(-12, 12)
    light = th.light + rng.uniform(-.05, .04)
    colour = hsl(hue, th.sat, light)
    shade = hsl(hue, min(th.sat + .1, 1), light * .68)
    pale = hsl(hue, th.sat, light + (1 - light) * .55)
    inner = PINK if th.sat > .2 else hsl(hue, .1, light * .75)
    ahue = th.accent_hue + rng.uniform(-30, 30)
    accent, accent_dark = hsl(ahue, .75, .62), hsl(ahue, .7, .45)
    ear_colour, ear_inner = colour, inner
    if 'eyepatch' in th.extras:
        shade, ear_colour, ear_inner = hsl(hue, .05, .5), '#4a4350', '#6b6470'

    d = Drawing()
    geometry, top, face_y = body(rng, th.shape)
    wide = th.shape == 'mochi'
    ears(d, th.ears, top, wide, ear_colour, shade, ear_inner, accent)
    d.solid(geometry[0], geometry[1], fill(colour, shade))
    d.add('<ellipse cx="%s" cy="%s" rx="%s" ry="%s" transform="rotate(-35 %s '
          '%s)" fill="#fff" opacity=".35"/>' % (
              n(CX - .5 * R), n(top + .42 * R), n(.2 * R), n(.1 * R),
              n(CX - .5 * R), n(top + .42 * R)))

    if th.ears == 'floppy':
        for side in (-1, 1):
            ex, ey = CX + side * R * .9, CY - R * .28
            d.solid('ellipse', 'cx="%s" cy="%s" rx="%s" ry="%s" transform='
                    '"rotate(%d %s %s)"' % (n(ex), n(ey + .3 * R), n(.26 * R),
                                            n(.5 * R), -side * 22, n(ex),
                                            n(ey)), fill(shade, shade))
    look_x, look_y = rng.uniform(-14, 14), rng.uniform(-6, 6)
    fx, fy = CX + look_x, face_y + look_y
    es = rng.uniform(44, 58)
    ey = fy - 10
    if th.ears == 'frog':
        es, ey, fx = R * .5, top + 10, CX
    if 'patch' in th.extras:
        d.add('<ellipse cx="%s" cy="%s" rx="%s" ry="%s" %s/>' % (
            n(CX + look_x * .5), n(face_y + 14), n(.72 * R), n(.6 * R),
            fill(pale)))
    if 'spots' in th.extras:
        for k in range(3):
            a, b = rng.choice(((-.62, -.35), (.6, -.4), (-.7, .3), (.7, .25),
                               (-.3, .65), (.32, .66)))
            d.add('<circle cx="%s" cy="%s" r="%d" %s opacity=".7"/>' % (
                n(CX + a * R), n(face_y + b * R), rng.randint(8, 15),
                fill(pale)))
    if 'pleats' in th.extras:
        d.add('<path d="M%d %sq8 14 0 28M%d %sq-8 14 0 28M%d %sv30" %s/>' % (
            CX - 26, n(top + 6), CX + 26, n(top + 6), CX, n(top + 2),
            line(shade, 5)))
    if 'eyepatch' in th.extras:
        for side in (-1, 1):
            x = fx + side * es
            d.add('<ellipse cx="%s" cy="%s" rx="28" ry="34" transform="rotate'
                  '(%d %s %s)" %s/>' % (n(x), n(ey + 4), side * -30, n(x),
                                        n(ey + 4), fill(hsl(hue, .06, .5))))
    if rng.random() < th.blush:
        d.add('<g %s opacity=".55"><ellipse cx="%s" cy="%s" rx="19" ry="11"/>'
              '<ellipse cx="%s" cy="%s" rx="19" ry="11"/></g>' % (
                  fill(PINK), n(fx - es - 26), n(ey + 34), n(fx + es + 26),
                  n(ey + 34)))
    scale = rng.uniform(.88, 1.12)
    for side in (-1, 1):
        eye(d, eyes, fx + side * es, ey, scale, side)
    my = fy + 30
    if 'nose' in th.extras:
        d.add('<ellipse cx="%s" cy="%s" rx="34" ry="24" %s/><ellipse cx="%s" '
              'cy="%s" rx="12" ry="8" %s/>' % (n(fx), n(fy + 26), fill(pale),
                                               n(fx), n(fy + 16), fill(DARK)))
        my = fy + 38
    if 'bignose' in th.extras:
        d.add('<ellipse cx="%s" cy="%s" rx="19" ry="24" %s/><ellipse cx="%s" '
              'cy="%s" rx="5" ry="7" %s opacity=".5"/>' % (
                  n(fx), n(fy + 12), fill('#4a4350'), n(fx - 6), n(fy + 4),
                  fill(WHITE)))
        my = fy + 50
    if 'snout' in th.extras:
        d.add('<ellipse cx="%s" cy="%s" rx="30" ry="21" %s/><g %s><ellipse '
              'cx="%s" cy="%s" rx="5" ry="7"/><ellipse cx="%s" cy="%s" rx="5" '
              'ry="7"/></g>' % (n(fx), n(fy + 22), fill(pale, shade, 4),
                                fill(shade), n(fx - 10), n(fy + 22),
                                n(fx + 10), n(fy + 22)))
        my = fy + 54
    if 'whiskers' in th.extras:
        d.add('<path d="M%s %sl-40-6m40 18-40 6M%s %sl40-6m-40 18 40 6" %s '
              'opacity=".5"/>' % (n(fx - es - 14), n(my - 4), n(fx + es + 14),
                                  n(my - 4), line(shade, 4)))
    mouth(d, mouth_kind, round(fx), round(my))
    accessory(d, acc, top, fy, es, accent, accent_dark)
    return d.svg('%s %d' % (pack, index), rng.randint(-9, 9))


def write_images(root, packs=300, seed=1717):
    """Write root/{pack}/{n}.svg for the generated data set; files already
    holding the right content are left alone. Returns how many were written.
    """
    sizes = {}
    order = []
    for sticker in generate(packs, seed).stickers:
        if sticker.pack not in sizes:
            order.append(sticker.pack)
        sizes[sticker.pack] = sizes.get(sticker.pack, 0) + 1
    written = 0
    for pack in order:
        folder = os.path.join(root, pack)
        os.makedirs(folder, exist_ok=True)
        present = set(os.listdir(folder))
        for index in range(1, sizes[pack] + 1):
            data = sticker_svg(seed, pack, index).encode('utf-8')
            base = '%d.svg' % index
            name = os.path.join(folder, base)
            if base in present:
                try:
                    with open(name, 'rb') as f:
                        if f.read() == data:
                            continue
                except (IOError, OSError):
                    pass
            # Replaced whole, never seen half-written; per process, as two servers
            # starting at once may both write.
            tmp = '%s.%d.tmp' % (name, os.getpid())
            with open(tmp, 'wb') as f:
                f.write(data)
            os.replace(tmp, name)
            written += 1
    return written
