"""Robyn: one route, its handler answering Robyn's Response, on Robyn's
Rust server started in the given loop as the adapter starts it (held.py;
app.start() would run it in a loop of its own)."""
import asyncio
import signal

from robyn import Request, Response, Robyn

from runtime.frameworks import load_file

held = load_file('robyn_server', 'held')     # not the site's adapter


async def ugly(request: Request):
    return Response(200, {'Content-Type': 'text/plain; charset=utf-8'}, 'UGLY')


def serve(loop, host, port):
    app = Robyn(__file__)
    app.get('/ugly')(ugly)

    async def run():
        stopped = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stopped.set)
        server = await held.start(app, host, port)
        await stopped.wait()
        await held.stop(server)
    loop.run_until_complete(run())
