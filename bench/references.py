"""The bare framework references: `python -m bench.hello` per framework and loop
of the engines in a run, started like the engines."""
import importlib.util
import os
import sys

from .engine import EngineServer


def name(framework, loop):
    return 'hello-' + framework + ('-uvloop' if loop == 'uvloop' else '')


def of_engine(engine_name):
    """The hello reference an engine's /ugly is compared with, or None."""
    from runtime import engines
    e = engines.BY_NAME.get(engine_name)
    return e and name(e.framework, e.loop)


def python(framework):
    """This interpreter when it has the framework, else the legacy one."""
    from runtime import engines
    if importlib.util.find_spec(engines.MODULES[framework]) is not None:
        return sys.executable
    legacy = os.path.join(engines.LEGACY, 'bin', 'python')
    return legacy if os.access(legacy, os.X_OK) else sys.executable


class HelloServer(EngineServer):
    def __init__(self, framework, loop, port, log_path, pin=()):
        super().__init__(name(framework, loop), port, [], log_path, pin)
        self.argv = list(pin) + [python(framework), '-m', 'bench.hello', framework,
                                 '-p', str(port)] + (
            ['--uvloop'] if loop == 'uvloop' else [])
