"""The charts' titles fit their pictures: a long one is wrapped, not cut
off at the figure's edge."""
import pytest

from bench import charts
from bench.latency import chart
from test_advise import results


@pytest.fixture
def drawn(monkeypatch):
    """The figures the charts close, kept to be measured."""
    kept = []
    monkeypatch.setattr(chart.plt, 'close', kept.append)
    return kept


def inside(fig):
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    for title in (ax.title, ax._left_title):
        if title.get_text():
            box = title.get_window_extent(renderer)
            assert 0 <= box.x0 and box.x1 <= fig.bbox.width, (
                title.get_text(), box, fig.bbox.width)
            return title.get_text()
    raise AssertionError('no title')


def test_the_mix_capacity_chart_title_fits(tmp_path, drawn):
    data = results()
    for c in data['capacity']:
        c['page'] = 'mix'
        c['target'] = c['target'] + '-with-a-long-loop-name-uvloop'
    data['settings']['runs'] = 3
    assert chart.capacity_chart(data, 'mix', str(tmp_path / 'c.png'))
    text = inside(drawn[-1])
    assert 'higher is better' in text.replace('\n', ' ')


def test_the_committed_runs_chart_titles_fit(tmp_path, drawn):
    """The README's chart (the mix's capacity) and a page's, from the
    committed run."""
    from bench.tables import cells
    from test_advise import committed
    path, data = committed()[-1]
    assert chart.capacity_chart(data, 'mix', str(tmp_path / 'c.png'))
    assert 'higher is better' in inside(drawn[-1]).replace('\n', ' ')
    assert charts.page_chart(data, cells(data), 'good', str(tmp_path / 'p.png'))
    inside(drawn[-1])
