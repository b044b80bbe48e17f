"""Static file names are checked before the file system is asked."""
import os

import pytest

from pages import Site, static
from runtime.settings import DEFAULTS

SITE = Site(None, DEFAULTS)


@pytest.fixture
def file_system_calls(monkeypatch):
    calls = []
    for name in ('realpath', 'isfile'):
        real = getattr(os.path, name)

        def spy(*args, real=real, name=name):
            calls.append(name)
            return real(*args)
        monkeypatch.setattr(os.path, name, spy)
    return calls


@pytest.mark.parametrize('path', [
    '/static/' + 'a/' * 32000 + 'style.css', '/static/' + 'a' * 300,
    '/static/a/b/c/d/style.css', '/static/../server.py',
    '/static/./style.css', '/static//style.css', '/static/style.css/',
    '/img/x/../../server.py', '/static/', '/static/\x00style.css',
])
def test_odd_names_are_refused_without_the_file_system(file_system_calls,
                                                        path):
    assert static.static_page(SITE, path) is static.NOT_FOUND
    assert file_system_calls == []


def test_plain_names_are_served(file_system_calls):
    assert static.static_page(SITE, '/static/style.css').status == 200
    assert static.static_page(SITE, '/favicon.ico').status == 200
    assert 'realpath' in file_system_calls
