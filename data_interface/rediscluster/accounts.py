"""The ACL of a Redis Cluster's accounts, on every node: the app's and the
loader's as on one Redis (data_interface/redis/accounts.py: the commands
the functions use, on the site's keys; neither may name st:{TAG}:admin but
the loader), with what a cluster client needs (the slot map, COMMAND,
ASKING during a migration, WAIT), and sticker_cluster, which replicas log
in as and which makes and reshards the cluster (redis-cli --cluster).
Print them for a cluster of your own:
python -m data_interface.rediscluster.accounts APP ADMIN CLUSTER"""
import sys

from data_interface.address import ADMIN_USER, APP_USER
from data_interface.redis.accounts import CONNECTION, FUNCTIONS, rules

CLUSTER_USER = 'sticker_cluster'
CLIENT = ('+cluster|slots +cluster|shards +cluster|info +cluster|myid '
          '+command +asking +readonly +wait')
MORE = '+zremrangebyscore +hdel +hgetall'
BUCKET = 'st:{b*}:'
APP_KEYS = ' '.join(
    ['%RW~' + BUCKET + k for k in ('s:*', 'sessions', 'b:*', 'ballots',
                                   'counters', 'log', 'swept')]
    + ['%R~' + BUCKET + 'limits']
    + ['%RW~st:{c}:' + k for k in ('stickers', 'ratings', 'applied',
                                   'early:*')]
    + ['%R~st:{c}:' + k for k in ('packs', 'pack:*', 'pack_ids:*')])
ADMIN_KEYS = '~st:*'
ADMIN_MORE = '+function|load +info +bgrewriteaof'


def acl_lines(app_password, admin_password, cluster_password):
    """`user` lines for each node's redis.conf. The default user stays as
    on one Redis (off, every right: Redis 7.0 replays the append-only file
    as that user)."""
    app = ' '.join((CONNECTION, FUNCTIONS, MORE, CLIENT))
    return ['user %s %s' % (APP_USER, rules(app_password, APP_KEYS, app)),
            'user %s %s' % (ADMIN_USER, rules(admin_password, ADMIN_KEYS,
                                              app + ' ' + ADMIN_MORE)),
            'user %s %s' % (CLUSTER_USER, rules(cluster_password, '~*',
                                                '+@all')),
            'user default off resetpass ~* &* +@all']


if __name__ == '__main__':
    if len(sys.argv) != 4:
        sys.exit(__doc__.splitlines()[-1])
    for line in acl_lines(*sys.argv[1:]):
        print('ACL SETUSER ' + line[len('user '):])
