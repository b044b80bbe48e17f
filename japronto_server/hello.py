"""japronto: one synchronous route and app.run() (one worker), on the given
loop instead of the uvloop one it would make."""
from japronto import Application


def ugly(request):
    return request.Response(text='UGLY')    # adds '; charset=utf-8' itself


def serve(loop, host, port):
    app = Application()
    app._loop = loop
    app.router.add_route('/ugly', ugly)
    app.run(host, port, worker_num=1)
