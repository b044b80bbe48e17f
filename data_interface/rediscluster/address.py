"""A Redis Cluster's address as given: seed nodes and an account."""
from collections import namedtuple

from data_interface.address import APP_USER, refuse_default

# host, port: the first seed (what a log names); seeds: every 'HOST:PORT'.
ClusterAddress = namedtuple('ClusterAddress', 'host port user password seeds')
ClusterAddress.__str__ = lambda a: 'rediscluster://%s' % ','.join(a.seeds)


def parse(text):
    """'[USER:PASSWORD@]HOST:PORT[,HOST:PORT...]' -> ClusterAddress;
    ValueError if bad. Without credentials, sticker_app / sticker_app (on
    the loopback only)."""
    user, password = APP_USER, APP_USER
    if text.startswith('rediscluster://'):
        text = text[len('rediscluster://'):]
    if '@' in text:
        credentials, text = text.rsplit('@', 1)
        user, _, password = credentials.partition(':')
        if not user or not password:
            raise ValueError('Redis Cluster address needs USER:PASSWORD@, '
                             'both not empty')
    seeds = []
    for seed in text.split(','):
        host, sep, port = seed.strip().rpartition(':')
        if (not sep or not host or not port.isdigit()
                or not 0 < int(port) < 65536):
            raise ValueError('Redis Cluster seeds must be HOST:PORT,..., '
                             'not %r' % text)
        refuse_default('Redis Cluster', host, user, password)
        seeds.append('%s:%d' % (host, int(port)))
    host, port = seeds[0].rsplit(':', 1)
    return ClusterAddress(host, int(port), user, password, tuple(seeds))


def from_json(value):
    return ClusterAddress(*value[:4], tuple(value[4]))


def url(a):
    return '%s:%s@%s' % (a.user, a.password, ','.join(a.seeds))
