"""An HTTP server whose pages each make one database call and answer a
short text (the 2017 article's select-async and select-sync): GET /ranked,
/pair, /vote, /visits, /stats; GET /counts/CALL tells how many calls did
their work, GET /evidence/CALL what the database shows (Caller.evidence).
Served by a framework's own adapter, as the site is; the database address
comes in the environment (STICKERS_CEILINGS_ADDRESS), not on the command
line.

    python -m bench.ceilings.serve FRAMEWORK [--loop uvloop] [--sync]
        --driver asynctnt|asyncpg|blocking -p PORT

--sync: synchronous pages (the framework answers them without a task)
over the blocking Tarantool connector. 3.7 compatible (japronto).
"""
import argparse
import asyncio
import os
import sys

from pages.http import Route, json_response, text_response
from runtime import edge, frameworks
from runtime.engines import LOOPS, new_loop
from runtime.serve import stop_event
from . import CALLS
from .calls import Caller, data_of

ADDRESS = 'STICKERS_CEILINGS_ADDRESS'
DONE = text_response(200, 'done')
BAD = text_response(500, 'bad result')
FAILED = text_response(503, 'database unavailable')
NOT_FOUND = text_response(404, 'not found')


class CallSite:
    """The part of pages.Site an adapter serves: routes, static files
    (none) and the 404 page."""
    static = ()
    favicon = ''
    refusals = {}

    def __init__(self, data, sync):
        self.callers = {name: Caller(data, name) for name in CALLS}
        self.sync = sync

    def routes(self):
        routes = []
        for name, caller in self.callers.items():
            routes += [
                Route('GET', '/' + name, self.page(caller), 'html',
                      not self.sync),
                Route('GET', '/counts/' + name, self.counts(caller), 'json',
                      False),
                Route('GET', '/evidence/' + name, self.evidence(caller),
                      'json', not self.sync)]
        return routes

    @staticmethod
    def page(caller):
        async def call(request):
            before = caller.failed
            if await caller.call():
                return DONE
            return FAILED if caller.failed > before else BAD
        return call

    @staticmethod
    def counts(caller):
        async def counts(request):
            return json_response(200, caller.counts())
        return counts

    @staticmethod
    def evidence(caller):
        async def evidence(request):
            return json_response(200, await caller.evidence())
        return evidence

    async def not_found(self, request, **params):
        return NOT_FOUND


def main(argv=None):
    p = argparse.ArgumentParser(prog='python -m bench.ceilings.serve')
    p.add_argument('framework', choices=frameworks.NAMES)
    p.add_argument('--loop', choices=LOOPS, default='uvloop')
    p.add_argument('--driver', required=True,
                   choices=('asynctnt', 'asyncpg', 'blocking'))
    p.add_argument('--sync', action='store_true')
    p.add_argument('-p', '--port', type=int, required=True)
    p.add_argument('--host', default='127.0.0.1')
    args = p.parse_args(argv)
    loop = new_loop(args.loop)
    asyncio.set_event_loop(loop)
    stopped = stop_event()
    data = data_of(args.driver, os.environ[ADDRESS])
    loop.run_until_complete(data.start())
    adapter = frameworks.adapter(args.framework)
    try:
        loop.run_until_complete(adapter.serve(
            CallSite(data, args.sync), args.host, args.port, stopped,
            edge.LIMITS))
    finally:
        loop.run_until_complete(data.close())
    return 0


if __name__ == '__main__':
    sys.exit(main())
