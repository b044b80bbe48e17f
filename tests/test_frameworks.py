"""The framework table's loading of files by path."""
import sys

from runtime import frameworks


def test_a_file_loaded_by_path_is_its_functions_module():
    """A function's module is found by its __module__ in sys.modules (as
    Litestar does to read a handler's annotations in a bare hello)."""
    ugly = frameworks.load_file('asgi_server', 'ugly')
    assert sys.modules[ugly.app.__module__] is ugly
