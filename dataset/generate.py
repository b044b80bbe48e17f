"""The generated data set: packs of stickers with a spread of ratings.

Everything comes from random.Random(seed) (never the global generator) and
only from calls whose results do not depend on the Python version, so a seed
gives the same data set on CPython 3.7 and later.
"""
import random

from .model import PackRow, StickerRow, DataSet, votes_for
from .words import ADJECTIVES, NOUN_LIST

MIN_SIZE, MAX_SIZE = 30, 78
MEAN_SIZE = 54               # 300 packs -> 16,200 stickers


def image_path(pack, n):
    """URL path of the n-th (from 1) sticker picture of a pack."""
    return '/img/%s/%d.svg' % (pack, n)


def pack_names(rng, count):
    """`count` unique (slug, title) pairs, adjective x noun, shuffled."""
    pairs = [(adj, noun) for adj, _ in ADJECTIVES for noun in NOUN_LIST]
    rng.shuffle(pairs)
    names = []
    for i in range(count):
        adj, noun = pairs[i % len(pairs)]
        lap = i // len(pairs)
        name, title = '%s_%s' % (adj, noun), '%s %s' % (
            adj.capitalize(), noun.capitalize())
        if lap:
            name, title = '%s_%d' % (name, lap + 1), '%s %d' % (title, lap + 1)
        names.append((name, title))
    return names


def pack_sizes(rng, count):
    """Sizes in MIN_SIZE..MAX_SIZE adding up to count * MEAN_SIZE."""
    sizes = [rng.randint(MIN_SIZE, MAX_SIZE) for _ in range(count)]
    gap = count * MEAN_SIZE - sum(sizes)
    while gap:
        i = rng.randrange(count)
        step = 1 if gap > 0 else -1
        if MIN_SIZE <= sizes[i] + step <= MAX_SIZE:
            sizes[i] += step
            gap -= step
    return sizes


def rating(rng):
    """Integer in -60..60, bell-shaped around 0 (sum of four uniforms)."""
    return sum(rng.randint(-15, 15) for _ in range(4))


def generate(packs=300, seed=1717):
    """DataSet of `packs` packs (~54 stickers each) for this seed."""
    if packs < 0:
        raise ValueError('packs must be >= 0, got %r' % (packs,))
    rng = random.Random(seed)
    names = pack_names(rng, packs)
    sizes = pack_sizes(rng, packs)
    pack_rows, stickers = [], []
    for (name, title), size in zip(names, sizes):
        pack_rows.append(PackRow(name, title))
        for n in range(1, size + 1):
            r = rating(rng)
            plus, minus = votes_for(r, rng.randint(0, 25))
            stickers.append(StickerRow(len(stickers) + 1, name,
                                       image_path(name, n), r, plus, minus))
    return DataSet(pack_rows, stickers)
