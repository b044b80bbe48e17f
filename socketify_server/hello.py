"""socketify: one async route on socketify's App, made inside the given
running loop (its Loop then drives uWebSockets' libuv loop from that one, as
app.run() would from a loop of its own)."""
from socketify import App


async def ugly(res, req):
    res.write_header('Content-Type', 'text/plain; charset=utf-8')
    res.end('UGLY')


def serve(loop, host, port):
    async def start():
        app = App()
        app.get('/ugly', ugly)
        app.listen({'port': port, 'host': host})
        return app
    app = loop.run_until_complete(start())
    app.loop.started = True
    loop.call_soon(app.loop._keep_alive)
    loop.run_forever()
