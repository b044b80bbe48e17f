"""Runs socketify's libuv loop (uWebSockets lives in it) inside the running
asyncio loop, woken by libuv's own epoll descriptor.

socketify's Loop instead polls libuv from asyncio on every turn
(call_soon(uv_run NOWAIT)): it spins a core while busy and for a while
after, then polls every millisecond for 5 s, then every 10 ms while idle (so
the first request after a pause waits up to 10 ms). Here asyncio watches
libuv's epoll descriptor and a timer for libuv's next timeout, and runs libuv
only when it has something to do.

libuv hands new or changed watchers to epoll only at its next poll, so a
turn runs libuv again while its watcher queue is not empty (a new
connection, a response that must wait for the socket to drain).
"""
import cffi

from socketify.native import ffi as socketify_ffi

NOWAIT = 2      # UV_RUN_NOWAIT
ROUNDS = 8      # libuv runs per turn at most, then the next turn goes on
SLACK = 0.005   # seconds a libuv timer may fire late

ffi = cffi.FFI()
ffi.cdef("""
int uv_run(void *loop, int mode);
int uv_backend_fd(const void *loop);
int uv_backend_timeout(const void *loop);
int uv_loop_alive(const void *loop);
/* The head of uv_loop_t (libuv 1.x, unix): stable in the 1.x ABI. */
typedef struct {
    void *data;
    unsigned int active_handles;
    void *handle_queue[2];
    void *active_reqs;
    void *internal_fields;
    unsigned int stop_flag;
    unsigned long flags;
    int backend_fd;
    void *pending_queue[2];
    uintptr_t watcher_queue[2];
} loop_head;
""")
uv = ffi.dlopen('libuv.so.1')


class Driver:
    """Runs the libuv loop at `native` (a uv_loop_t*) from asyncio `loop`."""

    def __init__(self, loop, native):
        self.loop = loop
        address = int(socketify_ffi.cast('uintptr_t', native))
        self.uv = ffi.cast('void *', address)
        self.head = ffi.cast('loop_head *', self.uv)
        self.fd = uv.uv_backend_fd(self.uv)
        if self.fd < 0 or self.head.backend_fd != self.fd:
            raise RuntimeError('unexpected libuv loop layout')
        self.queue = int(ffi.cast(
            'uintptr_t', ffi.addressof(self.head, 'watcher_queue')))
        self.timer = None
        self.soon = False
        loop.add_reader(self.fd, self.run)
        self.run()

    def run(self):
        self.soon = False
        for _ in range(ROUNDS):
            uv.uv_run(self.uv, NOWAIT)
            if self.head.watcher_queue[0] == self.queue:
                break
        else:
            self.kick()
        timeout = uv.uv_backend_timeout(self.uv)
        if timeout == 0:
            if uv.uv_loop_alive(self.uv):
                self.kick()
        elif timeout > 0:
            when = self.loop.time() + timeout / 1000.0
            # libuv counts whole milliseconds: a timer a little late is
            # fine, one re-armed on every turn is not.
            if self.timer is None or when < self.timer.when() - SLACK:
                if self.timer is not None:
                    self.timer.cancel()
                self.timer = self.loop.call_at(when, self._timeout)

    def _timeout(self):
        self.timer = None
        self.run()

    def kick(self):
        """Run libuv soon: call after writing outside its callbacks."""
        if not self.soon:
            self.soon = True
            self.loop.call_soon(self.run)

    def pending(self):
        """Whether libuv has watchers epoll does not know of yet."""
        return self.head.watcher_queue[0] != self.queue

    def close(self):
        self.loop.remove_reader(self.fd)
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
