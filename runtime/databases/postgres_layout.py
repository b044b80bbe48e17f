"""Where a local cluster lives and who owns what (see managed.py): the
server's own files in DIRECTORY, the cluster in DIRECTORY/cluster, or, run
as root from a checkout the postgres account cannot enter, in
/var/lib/stickers-postgres/CHECKOUT-HASH. Run as root, DIRECTORY stays
root's and the cluster is postgres': root never writes where that account
could put a symbolic link."""
import hashlib
import logging
import os
import pwd
import shutil
import stat
import subprocess

from runtime.processes import launcher
from . import files

log = logging.getLogger('postgres')

SUPERUSER = 'postgres'
ELSEWHERE = '/var/lib/stickers-postgres'
# What older versions kept in DIRECTORY itself, which postgres then owned.
OLD_LAYOUT = ('data', 'postgres.log', 'superuser.password')


def as_root():
    return os.geteuid() == 0


def owner():
    """The account the cluster's processes run as: postgres when root."""
    return SUPERUSER if as_root() else None


def own(path):
    """Give path (never what a symbolic link there points to) to postgres,
    when root."""
    if as_root():
        user = pwd.getpwnam(SUPERUSER)
        os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)


def initialised(home):
    return os.path.exists(os.path.join(home, 'data', 'PG_VERSION'))


def elsewhere(directory):
    checkout = os.path.dirname(os.path.dirname(directory))
    return os.path.join(ELSEWHERE, '%s-%s' % (
        os.path.basename(checkout) or 'stickers',
        hashlib.sha1(directory.encode()).hexdigest()[:10]))


def home_of(directory):
    """Where the cluster lives: in directory/cluster if the postgres user
    can reach it (or it was made there), else in a directory of its own;
    in directory itself while an older layout's is there."""
    inside = os.path.join(directory, 'cluster')
    for home in (inside, directory, elsewhere(directory)):
        if initialised(home):
            return home
    if not as_root():
        return inside
    parent = os.path.dirname(directory)
    while not os.path.isdir(parent):
        parent = os.path.dirname(parent)
    reachable = subprocess.run(
        launcher(user=SUPERUSER) + ['test', '-x', parent],
        stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    return inside if reachable else elsewhere(directory)


def settle(directory, home):
    """Make, own and tighten directory and the cluster's home (existing ones
    too); move a cluster of the older layout (home == directory, not
    running) into directory/cluster. Returns the home."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    inside = os.path.join(directory, 'cluster')
    group = None
    if as_root():   # first: postgres owned it in the older layout
        group = pwd.getpwnam(SUPERUSER).pw_gid if home in (
            inside, directory) else 0
        os.chown(directory, 0, group)
    files.tighten(directory, 0o710 if group else 0o700, group)
    if home == directory:
        move_into(directory, inside)
        home = inside
    if home == elsewhere(directory):
        os.makedirs(ELSEWHERE, mode=0o755, exist_ok=True)
    os.makedirs(home, mode=0o700, exist_ok=True)
    own(home)
    files.tighten(home)
    return home


def move_into(directory, inside):
    log.info('moving the PostgreSQL cluster of %s into %s', directory,
             inside)
    os.makedirs(inside, mode=0o700, exist_ok=True)
    own(inside)
    for name in OLD_LAYOUT:
        if os.path.lexists(os.path.join(directory, name)):
            os.rename(os.path.join(directory, name),
                      os.path.join(inside, name))
    # What postgres may have put in place of the server's own files.
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        found = os.lstat(path)
        if name != 'cluster' and (found.st_uid != os.geteuid()
                                  or not stat.S_ISREG(found.st_mode)):
            log.warning('removing %s, not a file of this account', path)
            if stat.S_ISDIR(found.st_mode):
                shutil.rmtree(path)
            else:
                os.remove(path)
