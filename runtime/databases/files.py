"""Files of the local databases that only their account may read: made 0600
(directories 0700), and opened without following a symbolic link, so that
whoever can write to a directory cannot send root's reads and writes to
another file through one; among them the accounts' passwords. A secret
kept (secret()) is refused if another account owns its file."""
import errno
import os
import secrets
import stat

NOFOLLOW = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY   # a FIFO: no wait


def _open(path, flags, mode=0o600):
    try:
        return os.open(path, flags | NOFOLLOW, mode)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise OSError(e.errno, 'a symbolic link, not followed', path)
        raise


def read(path, tail=None):
    """The text of the file at path (its last `tail` bytes); OSError if
    there is none or it is a symbolic link."""
    fd = _open(path, os.O_RDONLY)
    with open(fd, 'rb') as f:
        if tail is not None:
            f.seek(max(0, os.fstat(fd).st_size - tail))
        return f.read().decode('utf-8', 'replace')


def write(path, text, exclusive=False):
    """Write text to the file at path, mode 0600; with exclusive,
    FileExistsError if there is one."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else
                                        os.O_TRUNC)
    fd = _open(path, flags)
    with open(fd, 'w') as f:
        os.fchmod(fd, 0o600)
        f.write(text)


def append(path, text):
    fd = _open(path, os.O_WRONLY | os.O_APPEND)
    with open(fd, 'a') as f:
        f.write(text)


def tighten(directory, mode=0o700, group=None):
    """The directory to `mode` (and `group`), and each regular file right
    in it readable by its owner only: what made them may have had a wider
    umask."""
    fd = _open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fchmod(fd, mode)
        if group is not None:
            os.fchown(fd, -1, group)
    finally:
        os.close(fd)
    for name in os.listdir(directory):
        try:
            fd = _open(os.path.join(directory, name), os.O_RDONLY)
        except OSError:    # a symbolic link, a socket, gone meanwhile
            continue
        try:
            now = os.fstat(fd).st_mode
            if stat.S_ISREG(now) and now & 0o077:
                os.fchmod(fd, stat.S_IMODE(now) & 0o700)
        finally:
            os.close(fd)


def secret(path, default=None, create=False):
    """The password kept in the file at path (never through a symbolic
    link), made 0600 if it was not (private()); with create, a random one
    is written there (mode 0600) the first time. Else default if no
    file."""
    try:
        fd = _open(path, os.O_RDONLY)
    except FileNotFoundError:
        if not create:
            return default
    else:
        with open(fd, 'rb') as f:
            private(fd, path)
            return f.read().decode('utf-8', 'replace').strip()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    password = secrets.token_urlsafe(24)
    try:
        write(path, password + '\n', exclusive=True)
    except FileExistsError:   # another process made it first
        return secret(path)
    return password


def private(fd, path):
    """The open file at path made 0600, as write() makes it (what made it
    may have had a wider umask); PermissionError if it is another
    account's, which may know what it holds, or cannot be made 0600."""
    found = os.fstat(fd)
    if found.st_uid != os.geteuid():
        raise PermissionError(
            errno.EPERM, 'belongs to uid %d, which may know what it holds, '
            'not to this account (uid %d): remove it' % (
                found.st_uid, os.geteuid()), path)
    if stat.S_IMODE(found.st_mode) != 0o600:
        try:
            os.fchmod(fd, 0o600)
        except OSError as e:
            raise PermissionError(e.errno, 'cannot be made private (mode '
                                  '0600): %s' % e.strerror, path)
