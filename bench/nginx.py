"""The C reference: Debian's nginx with a generated config in its own
directory (pid, logs and temp files there too, so it runs as root without
touching /etc/nginx), serving /ugly with the engines' exact bytes and
Content-Type and a static copy of /about."""
import os
import re
import shutil
import subprocess
import time

from runtime.processes import answers, terminate
from .engine import tail
from .pagecheck import HTML_TYPE, UGLY_TYPE

# The pages nginx serves as a reference.
NGINX_PAGES = ('ugly', 'about')
# Without a master process nginx runs one worker whatever worker_processes
# says: it has one from 2 workers on.
CONFIG = '''daemon off;
master_process {master};
worker_processes {workers};
error_log {dir}/error.log warn;
pid {dir}/nginx.pid;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 1000000000;
{temp_paths}
    server {{
        listen 127.0.0.1:{port} backlog=1024;
        location = /ugly {{
            default_type "{ugly_type}";
            return 200 "UGLY";
        }}
        location = /about {{
            types {{ }}
            default_type "{html_type}";
            alias {dir}/about.html;
        }}
    }}
}}
'''


def version():
    try:
        done = subprocess.run(['nginx', '-v'], capture_output=True, text=True)
    except OSError:
        return None
    return done.stderr.strip()


def temp_paths(directory):
    """Temp path directives for the modules this nginx was built with."""
    try:
        built = subprocess.run(['nginx', '-V'], capture_output=True,
                               text=True).stderr
    except OSError:
        built = ''
    lines = []
    for kind in re.findall(r'--http-([a-z-]+)-temp-path=', built):
        directive = 'client_body' if kind == 'client-body' else kind
        lines.append('    %s_temp_path %s/%s;' % (directive, directory, kind))
    return '\n'.join(lines)


class Nginx:
    def __init__(self, directory, port, about, pin=(), workers=1):
        self.directory = os.path.abspath(directory)
        self.workers = workers
        self.port, self.about = port, about
        self.url = 'http://127.0.0.1:%d' % port
        self.pin = list(pin)
        self.process = None

    def write_config(self):
        os.makedirs(self.directory, exist_ok=True)
        if self.about is not None:
            with open(os.path.join(self.directory, 'about.html'), 'wb') as f:
                f.write(self.about)
        path = os.path.join(self.directory, 'nginx.conf')
        with open(path, 'w') as f:
            f.write(CONFIG.format(dir=self.directory, port=self.port,
                                  workers=self.workers,
                                  master='on' if self.workers > 1 else 'off',
                                  temp_paths=temp_paths(self.directory),
                                  ugly_type=UGLY_TYPE, html_type=HTML_TYPE))
        return path

    def start(self, timeout=20):
        if shutil.which('nginx') is None:
            raise RuntimeError('nginx is not installed (apt-get install nginx-light)')
        config = self.write_config()
        log = os.path.join(self.directory, 'error.log')
        self.argv = self.pin + ['nginx', '-p', self.directory, '-c', config,
                                '-e', log]
        with open(os.path.join(self.directory, 'stderr.log'), 'wb') as err:
            self.process = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=err, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not answers('127.0.0.1', self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError('nginx did not start:\n%s\n%s' % (
                    tail(os.path.join(self.directory, 'stderr.log')), tail(log)))
            time.sleep(0.05)

    def alive(self):
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout=10):
        terminate(self.process, timeout)
