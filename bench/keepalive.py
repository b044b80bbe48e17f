"""GET requests one after another over one keep-alive connection, on a raw
socket: the same bytes every time, no client library in between."""
import socket

from .pagecheck import session_cookie


class Closed(Exception):
    pass


class Connection:
    def __init__(self, port, host='127.0.0.1', timeout=120):
        self.sock = socket.create_connection((host, port), timeout)
        self.buffer = b''
        self.cookie = None      # sent once a page has set one

    def close(self):
        self.sock.close()

    def get(self, path):
        """(status, {header lowercased: value}, body); the first sid
        cookie a page sets is sent with every request after it."""
        head = 'GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n' % path
        if self.cookie:
            head += 'Cookie: sid=%s\r\n' % self.cookie
        self.sock.sendall((head + '\r\n').encode('ascii'))
        status, headers = self._head()
        if 'chunked' in headers.get('transfer-encoding', ''):
            body = self._chunked()
        else:
            body = self._read(int(headers.get('content-length', '0')))
        if self.cookie is None and 'set-cookie' in headers:
            self.cookie = session_cookie({'Set-Cookie': headers['set-cookie']})
        return status, headers, body

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise Closed('the server closed the connection')
        self.buffer += data

    def _line(self):
        while b'\r\n' not in self.buffer:
            self._fill()
        line, self.buffer = self.buffer.split(b'\r\n', 1)
        return line

    def _read(self, n):
        while len(self.buffer) < n:
            self._fill()
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def _head(self):
        status = int(self._line().split()[1])
        headers = {}
        while True:
            line = self._line().decode('latin-1')
            if not line:
                return status, headers
            name, _, value = line.partition(':')
            name = name.strip().lower()
            # Only sid matters among several Set-Cookie lines.
            if name == 'set-cookie' and name in headers and not value.strip(
                    ).startswith('sid='):
                continue
            headers[name] = value.strip()

    def _chunked(self):
        body = b''
        while True:
            size = int(self._line().split(b';')[0], 16)
            if size == 0:
                while self._line():
                    pass
                return body
            body += self._read(size)
            self._read(2)
