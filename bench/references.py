"""The bare framework references: `python -m bench.hello` per framework and loop
of the engines in a run, started like the engines."""
from .engine import EngineServer
from .storage import untag


def name(framework, loop):
    return 'hello-' + framework + ('-uvloop' if loop == 'uvloop' else '')


def of_engine(engine_name):
    """The hello reference an engine's /ugly is compared with (on the same
    interpreter: 'x@3.12' -> 'hello-…@3.12'), or None."""
    from runtime import engines
    engine_name, at, version = untag(engine_name).partition('@')
    e = engines.BY_NAME.get(engine_name)
    return e and name(e.framework, e.loop) + at + version


class HelloServer(EngineServer):
    def __init__(self, framework, loop, port, log_path, pin, python, label):
        super().__init__(name(framework, loop), port, [], log_path, pin,
                         label=label)
        self.argv = list(pin) + [python, '-m', 'bench.hello', framework,
                                 '-p', str(port)] + (
            ['--uvloop'] if loop == 'uvloop' else [])
