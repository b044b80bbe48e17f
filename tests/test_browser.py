"""End to end in headless Chromium: vote by clicking, as a visitor does.
Screenshots of every page go to test-artifacts/."""
import json
import os
import re

import pytest

from conftest import ARTIFACTS, ROOT
from plugins.servers import one_of_each

CHROMIUM = '/usr/bin/chromium'
CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic',
                 '--no-first-run', '--disable-background-networking',
                 '--disable-component-update', '--disable-sync']


@pytest.fixture
async def browser():
    if not os.path.exists(CHROMIUM):
        pytest.fail('Chromium is missing: ./run.sh setup installs it')
    from playwright.async_api import async_playwright
    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=CHROMIUM_ARGS)
        yield b
        await b.close()


# Screenshots of the first engine in test-artifacts/.
BROWSED = one_of_each(['aiohttp-tarantool-one', 'granian-tarantool-one',
           'fastapi-tarantool-one-uvloop', 'socketify-tarantool-multi-uvloop',
           'sanic-redis-pool-uvloop'])


@pytest.mark.parametrize('engine', BROWSED)
async def test_click_a_sticker_and_see_the_vote(browser, shared_server,
                                                engine):
    site = shared_server(engine).url
    page = await browser.new_page(viewport={'width': 1200, 'height': 900})

    async def screenshot(name, **options):
        """Of the first engine only: the others' pages are the same."""
        if engine == BROWSED[0]:
            os.makedirs(ARTIFACTS, exist_ok=True)
            await page.screenshot(path=os.path.join(ARTIFACTS, name), **options)

    await page.goto(site + '/')
    choice = page.locator('button.sticker-choice').first
    sticker_id = int(await choice.get_attribute('data-sticker-id'))
    pack = (await page.locator('form.contender .meta a').first
            .get_attribute('href')).rsplit('/', 1)[1]
    image = page.locator('button.sticker-choice img').first
    assert await image.evaluate('img => img.naturalWidth') > 0
    await screenshot('index.png')

    before = json.loads(await (await page.request.get(
        '%s/stickers/%s/%d' % (site, pack, sticker_id))).text())
    await choice.click()
    await page.wait_for_load_state()
    assert 'Vote counted' in await page.locator('[role=status]').inner_text()
    await screenshot('voted.png')
    after = json.loads(await (await page.request.get(
        '%s/stickers/%s/%d' % (site, pack, sticker_id))).text())
    assert after['votes_plus'] == before['votes_plus'] + 1
    assert after['rating'] == before['rating'] + 1

    for name in ('good', 'bad', 'about', 'ugly'):
        response = await page.goto('%s/%s' % (site, name))
        assert response.status == 200
        await screenshot(name + '.png', full_page=True)
    # From /good to a sticker's pack, on to the sticker, and back.
    await page.goto(site + '/good')
    link = page.locator('article.card .pack a').first
    title, href = await link.inner_text(), await link.get_attribute('href')
    await link.click()
    await page.wait_for_load_state()
    assert page.url == site + href and href.startswith('/packs/')
    assert await page.locator('h1.page-title').inner_text() == title
    await screenshot('pack.png', full_page=True)
    await page.locator('article.card .card-image a').first.click()
    await page.wait_for_load_state()
    assert await page.locator('.sticker-page img').evaluate(
        'img => img.naturalWidth') > 0
    assert 'No. 1 of' in await page.locator('.sticker-facts').inner_text()
    await screenshot('sticker.png')
    await page.go_back()
    await page.go_back()
    assert page.url == site + '/good'
    await page.set_viewport_size({'width': 390, 'height': 800})
    await page.goto(site + '/')
    await screenshot('index-phone.png')


async def test_results_html_reads_in_chromium_without_network(browser, tmp_path):
    """The current results page (docs/results), rebuilt from its results.md
    and charts: every chart shows, the tables are there, nothing is
    fetched; the README's chart is one of them."""
    from bench import html
    folder = os.path.join(ROOT, 'docs', 'results')
    with open(os.path.join(ROOT, 'README.md')) as f:
        charts = re.findall(r'!\[[^]]*\]\(docs/results/([^)]+)\)', f.read())
    assert charts and all(os.path.exists(os.path.join(folder, c))
                          for c in charts)
    page_file = tmp_path / 'results.html'
    with open(os.path.join(folder, 'results.md')) as f:
        page_file.write_text(html.render(f.read(), folder))
    page = await browser.new_page(viewport={'width': 1300, 'height': 900})
    fetched = []
    page.on('request', lambda r: fetched.append(r.url))
    await page.goto('file://%s' % page_file)
    assert fetched == ['file://%s' % page_file]
    images = page.locator('img')
    assert await images.count() >= 3
    for i in range(await images.count()):
        assert await images.nth(i).evaluate('img => img.naturalWidth') > 0
    assert await page.locator('table').count() >= 3
    heading = await page.locator('h1').first.inner_text()
    assert heading == 'Benchmark results'
    await page.screenshot(path=os.path.join(ARTIFACTS, 'results-html.png'))
