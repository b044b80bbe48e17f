import argparse
import asyncio
import sys

from runtime import frameworks
from runtime.engines import new_loop
from runtime.settings import DEFAULTS


def main(argv=None):
    p = argparse.ArgumentParser(prog='python -m bench.hello',
                                description='a bare /ugly for one framework')
    p.add_argument('framework', choices=frameworks.NAMES)
    p.add_argument('--uvloop', action='store_true', help='uvloop, not asyncio')
    p.add_argument('-p', '--port', type=int, default=DEFAULTS.port)
    p.add_argument('--host', default=DEFAULTS.host)
    args = p.parse_args(argv)
    module = frameworks.hello(args.framework)
    loop = new_loop('uvloop' if args.uvloop else 'asyncio')
    asyncio.set_event_loop(loop)
    module.serve(loop, args.host, args.port)
    return 0


if __name__ == '__main__':
    sys.exit(main())
