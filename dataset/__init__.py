"""The sticker data set: a deterministic generated one, or a JSON dump.

    generate(packs=300, seed=1717) -> DataSet   ~16,200 stickers, 300 packs
    write_images(root, packs=300, seed=1717)    root/{pack}/{n}.svg for them
    read_dump(path) -> DataSet                  a real dump (see dataset.dump)

Sticker ids run 1..N without gaps, in pack order; a sticker's `image` is the
URL path of its picture (for generated sets /img/{pack}/{n}.svg, n counted
from 1 within the pack) and votes_plus - votes_minus == rating.
"""
from .model import PackRow, StickerRow, DataSet
from .generate import generate
from .svg import write_images
from .dump import read_dump, DumpError

__all__ = ['PackRow', 'StickerRow', 'DataSet', 'generate', 'write_images',
           'read_dump', 'DumpError']
