"""The generated sticker data set, its pictures and the JSON dump importer."""
import functools
import json
import os
import re
import xml.etree.ElementTree as ET

import pytest

import dataset
from dataset import (DataSet, DumpError, PackRow, StickerRow, generate,
                     read_dump, write_images)
from dataset.__main__ import main
from dataset.svg import sticker_svg, theme

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLE = os.path.join(HERE, 'data', 'sample_dump.json')
SLUG = re.compile(r'[a-z0-9_]+\Z')
SVG_NS = '{http://www.w3.org/2000/svg}'


@functools.lru_cache(maxsize=None)
def full():
    return generate()


def pictures(data, seed=1717):
    """(sticker, svg text) for every sticker of a generated data set."""
    counters = {}
    for s in data.stickers:
        counters[s.pack] = counters.get(s.pack, 0) + 1
        yield s, sticker_svg(seed, s.pack, counters[s.pack])


def test_api_shapes():
    assert PackRow._fields == ('name', 'title')
    assert StickerRow._fields == ('id', 'pack', 'image', 'rating',
                                  'votes_plus', 'votes_minus')
    assert DataSet._fields == ('packs', 'stickers')
    assert issubclass(DumpError, ValueError)
    data = generate(packs=10)
    assert isinstance(data, DataSet)
    assert all(isinstance(p, PackRow) for p in data.packs)
    assert all(isinstance(s, StickerRow) for s in data.stickers)
    assert set(dataset.__all__) >= {'generate', 'write_images', 'read_dump',
                                    'DumpError', 'PackRow', 'StickerRow',
                                    'DataSet'}


def test_generate_is_deterministic():
    assert generate(packs=10) == generate(packs=10)
    assert generate(packs=10, seed=5) == generate(packs=10, seed=5)
    assert generate(packs=10, seed=5) != generate(packs=10)
    assert generate(packs=0) == DataSet([], [])
    with pytest.raises(ValueError):
        generate(packs=-1)


def test_ids_run_without_gaps_in_pack_order():
    data = generate(packs=10)
    assert len(data.packs) == 10
    assert [s.id for s in data.stickers] == list(
        range(1, len(data.stickers) + 1))
    order = [p.name for p in data.packs]
    seen = []
    for s in data.stickers:
        if not seen or seen[-1] != s.pack:
            seen.append(s.pack)
    assert seen == order            # each pack in one run, in pack order
    counters = {}
    for s in data.stickers:
        counters[s.pack] = counters.get(s.pack, 0) + 1
        assert s.image == '/img/%s/%d.svg' % (s.pack, counters[s.pack])
    assert all(30 <= c <= 78 for c in counters.values())


def test_full_set_size():
    data = full()
    assert len(data.packs) == 300
    assert abs(len(data.stickers) - 16200) <= 16200 * .03
    sizes = {}
    for s in data.stickers:
        sizes[s.pack] = sizes.get(s.pack, 0) + 1
    assert min(sizes.values()) >= 30 and max(sizes.values()) <= 78
    assert len(set(sizes.values())) > 20      # sizes do vary


def test_ratings_spread_and_votes_add_up():
    stickers = full().stickers
    ratings = [s.rating for s in stickers]
    assert all(type(r) is int for r in ratings)
    assert max(ratings) - min(ratings) >= 80
    assert min(ratings) >= -60 and max(ratings) <= 60
    assert abs(sum(ratings)) / len(ratings) < 2      # centred on 0
    near = sum(1 for r in ratings if abs(r) <= 20)
    assert near > len(ratings) * .6                  # bell-shaped, not flat
    for s in stickers:
        assert s.votes_plus >= 0 and s.votes_minus >= 0
        assert s.votes_plus - s.votes_minus == s.rating


def test_pack_names_are_unique_slugs_with_titles():
    packs = full().packs
    names = [p.name for p in packs]
    assert len(set(names)) == len(names)
    assert all(SLUG.match(name) for name in names)
    titles = [p.title for p in packs]
    assert len(set(titles)) == len(titles)
    for p in packs:
        assert p.title == p.name.replace('_', ' ').title()


def test_many_packs_stay_unique():
    packs = generate(packs=1500).packs
    names = [p.name for p in packs]
    assert len(set(names)) == 1500
    assert all(SLUG.match(name) for name in names)


def test_svgs_are_safe_small_stickers():
    for sticker, text in pictures(generate(packs=10)):
        root = ET.fromstring(text)
        assert root.tag == SVG_NS + 'svg'
        assert root.get('viewBox') == '0 0 512 512'
        assert len(text.encode('utf-8')) < 3500, sticker
        low = text.lower()
        assert '<script' not in low and 'javascript:' not in low
        assert 'href="http' not in low and 'url(http' not in low
        assert ' on' not in re.sub(r'"[^"]*"', '', low)   # no onload= etc.
        for el in root.iter():
            href = el.get('href')
            if href is not None:
                assert href.startswith('#'), href
        ids = [el.get('id') for el in root.iter() if el.get('id')]
        assert len(ids) == len(set(ids)), sticker
        for ref in re.findall(r'(?:href="|url\()#([^")]+)', text):
            assert ref in ids, (sticker, ref)


def test_all_svgs_of_the_full_set_are_distinct():
    texts = [text for _, text in pictures(full())]
    assert len(texts) == len(full().stickers)
    assert len(set(texts)) == len(texts)
    # distinct as pictures too, not only by their <title>
    bare = set(re.sub(r'<title>.*?</title>', '', t) for t in texts)
    assert len(bare) == len(texts)


def test_svg_is_a_pure_function_of_seed_pack_index():
    a = sticker_svg(1717, 'grumpy_cats', 7)
    theme.cache_clear()
    assert sticker_svg(1717, 'grumpy_cats', 7) == a
    assert sticker_svg(1718, 'grumpy_cats', 7) != a
    assert sticker_svg(1717, 'grumpy_cats', 8) != a
    assert sticker_svg(1717, 'sleepy_cats', 7) != a
    # any pack name works, not only generated ones
    ET.fromstring(sticker_svg(1717, 'x', 1))


def test_write_images_is_idempotent(tmp_path):
    root = str(tmp_path / 'img')
    data = generate(packs=3)
    assert write_images(root, packs=3) == len(data.stickers)
    for sticker, text in pictures(data):
        name = os.path.join(root, *sticker.image.split('/')[2:])
        with open(name, encoding='utf-8') as f:
            assert f.read() == text
    assert write_images(root, packs=3) == 0
    first = os.path.join(root, data.packs[0].name, '1.svg')
    with open(first, 'w') as f:
        f.write('<svg/>')
    os.remove(os.path.join(root, data.packs[1].name, '2.svg'))
    assert write_images(root, packs=3) == 2
    assert write_images(root, packs=3) == 0
    leftovers = [n for _, _, files in os.walk(root) for n in files
                 if not n.endswith('.svg')]
    assert leftovers == []


def test_read_dump_sample():
    data = read_dump(SAMPLE)
    assert [p.name for p in data.packs] == [
        'grumpy_cats', 'sleepy_pandas', 'party_frogs_2']
    assert data.packs[0].title == 'Grumpy Cats'
    assert data.packs[1].title == 'sleepy_pandas'      # defaults to the name
    assert [s.id for s in data.stickers] == list(range(1, 10))
    assert [s.pack for s in data.stickers] == (
        ['grumpy_cats'] * 3 + ['sleepy_pandas'] * 2 + ['party_frogs_2'] * 4)
    assert [s.rating for s in data.stickers] == [3, -2, 0, 0, 12, -7, 1, 5, 0]
    assert data.stickers[0] == StickerRow(
        1, 'grumpy_cats', 'https://cdn.example.org/grumpy_cats/1.webp',
        3, 3, 0)
    assert data.stickers[1][4:] == (0, 2)
    assert data.stickers[3].image == '/img/sleepy_pandas/1.svg'
    for s in data.stickers:
        assert s.votes_plus - s.votes_minus == s.rating
        assert s.votes_plus >= 0 and s.votes_minus >= 0


def dump_file(tmp_path, doc):
    path = tmp_path / 'dump.json'
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc),
                    encoding='utf-8')
    return str(path)


def sample_doc():
    with open(SAMPLE, encoding='utf-8') as f:
        return json.load(f)


def broken(change):
    doc = sample_doc()
    change(doc)
    return doc


def set_(path, value):
    def change(doc):
        target = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


def delete(path):
    def change(doc):
        target = doc
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
    return change


BAD = [
    ('duplicate name', set_(['packs', 2, 'name'], 'grumpy_cats'),
     ['packs[2]', "'grumpy_cats'", 'already used by packs[0]']),
    ('bad slug', set_(['packs', 1, 'name'], 'Sleepy Pandas'),
     ['packs[1]', "'Sleepy Pandas'", 'slug']),
    ('slug with a slash', set_(['packs', 0, 'name'], 'a/b'),
     ['packs[0]', 'slug']),
    ('empty name', set_(['packs', 0, 'name'], ''), ['packs[0]', 'slug']),
    ('name not a string', set_(['packs', 0, 'name'], 7),
     ['packs[0]', '"name" must be a string, got an integer']),
    ('missing name', delete(['packs', 0, 'name']),
     ['packs[0]', '"name" must be a string, got nothing']),
    ('missing image', delete(['packs', 1, 'stickers', 1, 'image']),
     ["packs[1] 'sleepy_pandas'", 'stickers[1]', '"image"', 'got nothing']),
    ('empty image', set_(['packs', 0, 'stickers', 2, 'image'], ''),
     ["packs[0] 'grumpy_cats'", 'stickers[2]', '"image"', 'empty']),
    ('image not a string', set_(['packs', 0, 'stickers', 0, 'image'], None),
     ['stickers[0]', '"image"', 'null']),
    ('image of another scheme',
     set_(['packs', 2, 'stickers', 3, 'image'], 'ftp://x.org/a.png'),
     ["packs[2] 'party_frogs_2'", 'stickers[3]', 'ftp://x.org/a.png']),
    ('relative image', set_(['packs', 2, 'stickers', 0, 'image'], 'a.png'),
     ['stickers[0]', "'a.png'"]),
    ('image without a host', set_(['packs', 2, 'stickers', 0, 'image'],
                                  'https:///a.png'), ['stickers[0]']),
    ('rating as a string', set_(['packs', 0, 'stickers', 1, 'rating'], '3'),
     ["packs[0] 'grumpy_cats'", 'stickers[1]', '"rating"', 'integer',
      'a string "3"']),
    ('rating as a float', set_(['packs', 2, 'stickers', 2, 'rating'], 2.5),
     ['stickers[2]', '"rating"', '2.5']),
    ('rating as a boolean', set_(['packs', 2, 'stickers', 2, 'rating'], True),
     ['stickers[2]', '"rating"', 'boolean']),
    ('rating null', set_(['packs', 0, 'stickers', 0, 'rating'], None),
     ['stickers[0]', '"rating"', 'null']),
    ('sticker not an object', set_(['packs', 1, 'stickers', 0], 'x.png'),
     ['packs[1]', 'stickers[0] must be an object']),
    ('no stickers', set_(['packs', 1, 'stickers'], []),
     ["packs[1] 'sleepy_pandas'", 'empty']),
    ('stickers not a list', delete(['packs', 1, 'stickers']),
     ['packs[1]', '"stickers" must be a list']),
    ('empty title', set_(['packs', 0, 'title'], ' '), ['packs[0]', 'title']),
    ('pack not an object', set_(['packs', 1], 'sleepy_pandas'),
     ['packs[1] must be an object']),
    ('packs not a list', set_(['packs'], {}), ['"packs" must be a list']),
    ('no packs', delete(['packs']), ['"packs" must be a list, got nothing']),
]


@pytest.mark.parametrize('what,change,words', BAD, ids=[b[0] for b in BAD])
def test_read_dump_rejects(tmp_path, what, change, words):
    path = dump_file(tmp_path, broken(change))
    with pytest.raises(DumpError) as info:
        read_dump(path)
    message = str(info.value)
    assert message.startswith(path + ': ')
    for word in words:
        assert word in message, (word, message)


@pytest.mark.parametrize('text', ['', '{"packs": [', 'packs: []', '[1, 2]',
                                  '"just a string"'])
def test_read_dump_rejects_what_is_not_a_dump(tmp_path, text):
    with pytest.raises(DumpError) as info:
        read_dump(dump_file(tmp_path, text))
    assert ('not valid JSON' in str(info.value) or
            'expected an object' in str(info.value))


def test_read_dump_missing_file(tmp_path):
    with pytest.raises(DumpError) as info:
        read_dump(str(tmp_path / 'nope.json'))
    assert 'nope.json' in str(info.value) and 'cannot read' in str(info.value)


def test_read_dump_not_utf8(tmp_path):
    path = tmp_path / 'dump.json'
    path.write_bytes(b'{"packs": [{"name": "\xff"}]}')
    with pytest.raises(DumpError):
        read_dump(str(path))


def test_cli_check(tmp_path, capsys):
    assert main(['check', SAMPLE]) == 0
    assert '3 packs, 9 stickers' in capsys.readouterr().out
    bad = dump_file(tmp_path, broken(set_(['packs', 0, 'name'], 'Bad!')))
    assert main(['check', bad]) == 2
    err = capsys.readouterr().err
    assert 'packs[0]' in err and 'slug' in err
    assert main(['check', str(tmp_path / 'missing.json')]) == 2


def test_cli_images(tmp_path, capsys):
    root = str(tmp_path / 'img')
    total = len(generate(packs=2, seed=3).stickers)
    assert main(['images', '--root', root, '--packs', '2', '--seed', '3']) == 0
    out = capsys.readouterr().out
    assert out.startswith('%d of %d images written' % (total, total))
    assert main(['images', '--root', root, '--packs', '2', '--seed', '3']) == 0
    assert capsys.readouterr().out.startswith('0 of %d' % total)
    with pytest.raises(SystemExit) as info:
        main(['images', '--root', root, '--packs', '-3'])
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        main(['images'])
    assert info.value.code == 2
