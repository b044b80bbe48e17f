"""A site already running (bench.py --target URL): verified and timed like
an engine, but not started, pinned, profiled or stopped by the bench, and
with no bare hello to pair nor database process to read."""
import asyncio
import platform
import socket
import urllib.error
import urllib.request
from urllib.parse import urlsplit

import aiohttp

from . import verify
from .guesses import START_GUESS, VERIFY_GUESS, combos, series_guess, target_guess
from runtime.processes import answers


def parse(url):
    """'http://HOST[:PORT][/]' -> 'http://HOST:PORT'; ValueError says why
    not. The pages are timed at the site's root, so no path is allowed."""
    parts = urlsplit(url.strip())
    if parts.scheme != 'http':
        raise ValueError('%r: only http:// URLs' % url)
    try:
        port = parts.port or 80
    except ValueError:
        raise ValueError('%r: bad port' % url)
    if not parts.hostname:
        raise ValueError('%r: no host' % url)
    if parts.username or parts.password:
        raise ValueError('%r: no user or password in the URL' % url)
    if parts.path not in ('', '/') or parts.query or parts.fragment:
        raise ValueError('%r: the site must be at the root, without a path'
                         % url)
    host = '[%s]' % parts.hostname if ':' in parts.hostname else parts.hostname
    return 'http://%s:%d' % (host, port)


def default_label(url):
    """'http://10.0.0.5:8080' -> '10.0.0.5:8080'."""
    return url[len('http://'):]


def bad_label(label, reserved):
    """Why a label cannot name a row, or None: rows are matched by name,
    and a name with ' (' or '@' reads as a storage engine or interpreter."""
    if not label or label != label.strip():
        return '%r: a label is a non-empty name' % label
    if ' (' in label or '@' in label or '|' in label:
        return "%r: a label has no ' (', '@' or '|'" % label
    if label in reserved or label == 'nginx' or label.startswith('hello-'):
        return ('%r names a row the bench makes itself (an engine or a '
                'reference)' % label)
    return None


class Site:
    """What the runner needs of a server: its url, name, alive(), stop();
    it has no process of the bench's."""

    process = None
    log_path = None

    def __init__(self, name, url):
        self.name, self.url = name, url
        parts = urlsplit(url)
        self.host, self.port = parts.hostname, parts.port

    def alive(self):
        return answers(self.host, self.port, timeout=2)

    def stop(self):
        pass    # not ours to stop


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an HTTPError of its own: nothing at its Location is
    asked for."""

    def redirect_request(self, *args):
        return None


def describe(url):
    """What can be learned of the site from here: its address and the
    Server header of /ugly (never of where it redirects), if it sends one."""
    parts = urlsplit(url)
    try:
        address = socket.getaddrinfo(parts.hostname, parts.port,
                                     type=socket.SOCK_STREAM)[0][4][0]
    except OSError:
        address = None
    try:
        with urllib.request.build_opener(NoRedirect).open(
                url + '/ugly', timeout=10) as r:
            server = r.headers.get('Server')
    except urllib.error.HTTPError as e:
        server = e.headers.get('Server')
    except (OSError, ValueError):
        server = None
    return {'address': address, 'server_header': server,
            'measured_from': platform.node()}


def run(matrix, label, url):
    """Verify the site at url, then time its pages like an engine's; its
    target record says why when it fails."""
    s = matrix.s
    t = matrix.target(label, 'remote')
    # Not measurable from here: not started by the bench, its processes
    # and its database's maybe on another machine.
    t.update(url=url, started_by_bench=False, start_s=None, memory=None)
    if s.profile:
        t['note'] = "not profiled: its process is not the bench's to sample"
    site = Site(label, url)
    plan = list(combos(s, 'remote'))
    left = target_guess(s, 'remote')
    matrix.progress.show('%s · verifying' % label)
    if not site.alive():
        return matrix.fail(t, 'no answer at %s' % url, left)
    t.update(describe(url))
    t['verification'] = verify.engine(url)
    why = verify.failure(t['verification'])
    if why:
        return matrix.fail(t, 'verification failed: ' + why, left)
    matrix.progress.advance(START_GUESS + VERIFY_GUESS)
    if matrix.about is None and 'about' in s.pages:
        try:
            matrix.about = verify.page(url, '/about')
        except (verify.CheckFailed, aiohttp.ClientError, asyncio.TimeoutError) as e:
            return matrix.fail(t, 'copying /about: %s' % e, left)
        t['about_copied'] = True
    for step, (page, mode) in enumerate(plan):
        try:
            dead = matrix.turns([(label, site, None)], page, mode)
        except (OSError, ValueError, LookupError) as e:    # its first pack unread
            dead, why = {label}, str(e)
        else:
            why = 'stopped answering'
        if dead:
            return matrix.fail(t, '%s during %s %s' % (why, page, mode), sum(
                series_guess(s, p) for p, _ in plan[step + 1:]))
