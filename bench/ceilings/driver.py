"""One call through one driver alone, no HTTP: N calls in flight for S
seconds; prints one JSON line (calls done, seconds, this process's CPU,
what the database shows after). The spec comes as JSON on stdin, so no
password is on a command line:

    {"driver": "asynctnt", "address": "user:password@host:port",
     "call": "ranked", "seconds": 5, "in_flight": 100}

    python -m bench.ceilings.driver < spec.json

3.7 compatible: aiotarantool runs in the legacy environment.
"""
import asyncio
import json
import resource
import sys
import time

from .calls import Caller, data_of


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def timed(spec):
    data = data_of(spec['driver'], spec['address'])
    await data.start()
    try:
        caller = Caller(data, spec['call'])
        deadline = time.monotonic() + spec['seconds']

        async def worker():
            while time.monotonic() < deadline:
                await caller.call()
        started, cpu_before = time.monotonic(), cpu()
        await asyncio.gather(*[worker() for _ in range(spec['in_flight'])])
        seconds, cpu_s = time.monotonic() - started, cpu() - cpu_before
        return dict(caller.counts(), seconds=seconds, cpu_s=cpu_s,
                    evidence=await caller.evidence(),
                    python=sys.version.split()[0])
    finally:
        await data.close()


def main():
    spec = json.load(sys.stdin)
    try:
        import uvloop
        loop = uvloop.new_event_loop()
    except ImportError:
        loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    print(json.dumps(loop.run_until_complete(timed(spec))))
    return 0


if __name__ == '__main__':
    sys.exit(main())
