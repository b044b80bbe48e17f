"""pages.render: the parts kept per sticker give what Jinja renders with the
request's values, for any rating and any text the data set may hold."""
import pytest
from markupsafe import Markup

from data_interface import Sticker
from pages import render
from runtime.settings import DEFAULTS

RENDER = render.Renderer(DEFAULTS.templates)

STICKERS = [
    Sticker(1, 'cats', '/img/cats/1.png', 5, 7, 2, 'Cats & <Dogs>'),
    Sticker(2, 'cats', '/img/cats/2.png?a="b"&c={d}', -3, 0, 3, "It's {0}"),
    Sticker(3, 'zero', '/img/zero/3.png', 0, 4, 4, 'Ünïcödé — ✓'),
    Sticker(4, 'nul', '/img/nul/4.png', 12, 12, 0, 'a\x000\x00b'),
]


@pytest.mark.parametrize('s', STICKERS, ids=lambda s: str(s.id))
def test_card_is_what_jinja_renders(s):
    for place in (1, 9):
        values = render.card_values(place, s)
        # Twice: the first renders and keeps the part, the second uses it.
        for _ in range(2):
            assert (RENDER.card.render(s, values)
                    == RENDER.card.direct(s, values).encode())
    assert b'data-place="9"' in RENDER.card.render(s, render.card_values(9, s))


@pytest.mark.parametrize('s', STICKERS, ids=lambda s: str(s.id))
def test_contender_is_what_jinja_renders(s):
    values = render.contender_values(s, 'W' * 22, 'L' * 22)
    for _ in range(2):
        assert (RENDER.contender.render(s, values)
                == RENDER.contender.direct(s, values).encode())


def test_values_of_a_request_are_current():
    s = STICKERS[0]
    first = RENDER.cards([s]).decode()
    moved = RENDER.cards([s._replace(rating=-1, votes_plus=7,
                                     votes_minus=8)]).decode()
    assert 'title="rating">+5<' in first and '▲ 7' in first and '▼ 2' in first
    assert 'class="rating neg" title="rating">-1<' in moved and '▼ 8' in moved


def test_texts_are_escaped():
    text = RENDER.cards(STICKERS[:2]).decode()
    assert 'Cats &amp; &lt;Dogs&gt;' in text and '<Dogs>' not in text
    assert 'It&#39;s {0}' in text and '&#34;b&#34;&amp;c={d}' in text


def test_ratings_as_shown():
    s = STICKERS[0]
    cards = [render.card_values(1, s._replace(rating=r))[2:4]
             for r in (3, 0, -2)]
    assert cards == [(b'pos', b'+3'), (b'zero', b'0'), (b'neg', b'-2')]
    duel = [render.contender_values(s._replace(rating=r), 'w', 'l')[2]
            for r in (3, 0, -2)]
    assert [d.decode() for d in duel] == ['+3', '0', '\u22122']


def test_a_template_with_its_values_in_another_order_is_refused():
    part = render.Part(RENDER.templates, 'card.html', (
        'place', 'tone', 'place', 'signed', 'votes_plus', 'votes_minus'))
    with pytest.raises(ValueError, match='order'):
        part.render(STICKERS[0], render.card_values(1, STICKERS[0]))


def test_frame_is_the_page_jinja_renders():
    frame = render.Frame(RENDER.templates, 'top.html', 'cards', nav='good', heading='The best 9')
    middle = RENDER.cards(STICKERS)
    page = RENDER.templates.get_template('top.html').render(
        nav='good', heading='The best 9', cards=Markup(middle.decode()))
    assert frame.body(middle) == page.encode()
    assert RENDER.cards([]) in frame.body(RENDER.cards([]))


def test_duel_votes_each_against_the_other():
    a, b = STICKERS[0], STICKERS[2]
    text = RENDER.duel(a, b, ('A' * 22, 'B' * 22)).decode()
    forms = text.split('class="vs"')
    assert len(forms) == 2
    assert 'name="win" value="%s"' % ('A' * 22) in forms[0]
    assert 'name="lose" value="%s"' % ('B' * 22) in forms[0]
    assert 'name="win" value="%s"' % ('B' * 22) in forms[1]
    assert 'data-sticker-id="1"' in forms[0] and 'data-sticker-id="3"' in forms[1]


def test_a_template_is_read_once(tmp_path):
    """Rendering a page looks at its file no more: a page costs no stat,
    and a template changed on disk is served as it was until a restart."""
    import os
    import shutil
    directory = tmp_path / 'templates'
    shutil.copytree(DEFAULTS.templates, directory)
    renderer = render.Renderer(str(directory))
    first = renderer.page('error.html', status=404, message='gone')
    path = directory / 'error.html'
    path.write_text('changed {{ message }}')
    os.utime(path, (1, 2 ** 31))    # newer, whatever the clock's grain
    assert renderer.page('error.html', status=404, message='gone') == first
    assert 'changed' not in first
