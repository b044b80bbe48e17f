"""The ACL of the site's two Redis accounts: each may run only the
commands stickers.lua uses, on the keys it uses (Redis checks the commands
a function runs against the account that called it). The app's account
may only read the catalogue and the limits, and cannot name st:admin, so it
cannot call the loader's functions. Print them for a Redis of your own:
python -m data_interface.redis.accounts APP_PASSWORD ADMIN_PASSWORD"""
import hashlib
import sys

from data_interface.address import ADMIN_USER, APP_USER

CONNECTION = '+ping +auth +hello +select'
FUNCTIONS = ('+fcall +fcall_ro +time +exists +del +expire +pexpire +hget '
             '+hmget +hset +hincrby +zadd +zrem +zscore +zcard +zrange '
             '+zrandmember +zincrby +hexists +get +set')
APP_KEYS = ('%RW~st:s:* %RW~st:sessions %RW~st:b:* %RW~st:ballots '
            '%RW~st:stickers %RW~st:ratings %RW~st:counters %RW~st:swept '
            '%R~st:packs %R~st:pack:* %R~st:pack_ids:* %R~st:limits')
# The loader also loads the library and reads maxmemory for the caps; the
# local Redis's manager rewrites the append-only file at start with it.
ADMIN_KEYS = '~st:*'
ADMIN_MORE = '+function|load +info +bgrewriteaof'


def rules(password, keys, commands):
    digest = hashlib.sha256(password.encode('utf-8')).hexdigest()
    return 'on #%s resetkeys resetchannels %s -@all %s' % (
        digest, keys, commands)


def acl_lines(app_password, admin_password):
    """`user` lines for redis.conf or an ACL file. The default user is off
    (no one logs in as it) but keeps every right: Redis 7.0 replays the
    append-only file as that user and checks each MULTI/EXEC block (the
    writes of one function call) against its rights, dropping those it
    refuses (redis/redis#14541, fixed in 8.x): with its rights taken away,
    a restart lost every vote."""
    return ['user %s %s' % (APP_USER, rules(app_password, APP_KEYS,
                                            CONNECTION + ' ' + FUNCTIONS)),
            'user %s %s' % (ADMIN_USER, rules(
                admin_password, ADMIN_KEYS,
                ' '.join((CONNECTION, FUNCTIONS, ADMIN_MORE)))),
            # Last: redis-cli, logged in as default, runs the rest first.
            'user default off resetpass ~* &* +@all']


if __name__ == '__main__':
    if len(sys.argv) != 3:
        sys.exit(__doc__.splitlines()[-1])
    for line in acl_lines(*sys.argv[1:]):
        print('ACL SETUSER ' + line[len('user '):])
