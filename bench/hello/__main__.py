import argparse
import asyncio
import importlib
import sys

from bench.hello import FRAMEWORKS
from runtime.settings import DEFAULTS


def new_loop(uvloop):
    if uvloop:
        import uvloop as module
        return module.new_event_loop()
    return asyncio.new_event_loop()


def main(argv=None):
    p = argparse.ArgumentParser(prog='python -m bench.hello',
                                description='a bare /ugly for one framework')
    p.add_argument('framework', choices=FRAMEWORKS)
    p.add_argument('--uvloop', action='store_true', help='uvloop, not asyncio')
    p.add_argument('-p', '--port', type=int, default=DEFAULTS.port)
    p.add_argument('--host', default=DEFAULTS.host)
    args = p.parse_args(argv)
    module = importlib.import_module('bench.hello.%s_hello' % args.framework)
    loop = new_loop(args.uvloop)
    asyncio.set_event_loop(loop)
    module.serve(loop, args.host, args.port)
    return 0


if __name__ == '__main__':
    sys.exit(main())
