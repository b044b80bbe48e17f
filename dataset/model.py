"""The rows a data set is made of (for the generator and the importer)."""
from collections import namedtuple

PackRow = namedtuple('PackRow', 'name title')
StickerRow = namedtuple(
    'StickerRow', 'id pack image rating votes_plus votes_minus')
DataSet = namedtuple('DataSet', 'packs stickers')   # [PackRow], [StickerRow]


def votes_for(rating, base=0):
    """(votes_plus, votes_minus), both >= 0, whose difference is rating."""
    minus = base + max(0, -rating)
    return minus + rating, minus
