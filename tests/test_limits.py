"""Rate limits (pages.limits): what an address counts as, the buckets, and
the ballot limit's defaults."""
import pytest

from runtime import settings
from pages.limits import RateLimit, client_of, parse_rate


def test_an_ipv6_client_counts_by_its_64():
    a = client_of('2001:db8:1:2::1')
    assert a == client_of('2001:db8:1:2:ffff:ffff:ffff:ffff')
    assert a == client_of('2001:0db8:0001:0002:0000:0000:0000:0abc')
    assert a != client_of('2001:db8:1:3::1')
    assert a != client_of('2001:db8:2:2::1')


def test_ipv4_and_ipv4_mapped_count_by_the_address():
    assert client_of('192.0.2.1') == '192.0.2.1'
    assert client_of('::ffff:192.0.2.1') == '192.0.2.1'
    assert client_of('::ffff:c000:201') == '192.0.2.1'
    # Two mapped addresses of one /64 are two clients.
    assert client_of('::ffff:192.0.2.2') != client_of('::ffff:192.0.2.1')


ODD = [None, '', 'not:an:address', '1' * 1000, '\udcff:\udcfe', 'localhost']


def test_anything_else_is_a_client_of_its_own():
    """What is not an address counts as itself: it raises nothing, and no
    two of them, nor one of them and an address, share a bucket."""
    assert [client_of(ip) for ip in ODD] == ODD
    addresses = ['127.0.0.1', '::1', '192.0.2.1', '2001:db8::1']
    limit = RateLimit(1, 60, clock=lambda: 0.0)
    assert [limit.take(client_of(ip)) for ip in ODD + addresses] == [0] * (
        len(ODD) + len(addresses))
    assert len(limit.buckets) == len(ODD) + len(addresses)


def test_a_64_shares_one_bucket():
    limit = RateLimit(2, 60, clock=lambda: 0.0)
    taken = [limit.take(client_of('2001:db8::%x' % i)) for i in range(1, 4)]
    assert taken == [0, 0, 60 // 2]
    assert limit.take(client_of('2001:db8:0:1::1')) == 0
    assert len(limit.buckets) == 2


def test_buckets_refill_and_stay_bounded():
    now = [0.0]
    limit = RateLimit(2, 1, max_addresses=100, clock=lambda: now[0])
    assert [limit.take('a') for _ in range(3)] == [0, 0, 1]
    now[0] += 0.5
    assert limit.take('a') == 0 and limit.take('a') == 1
    for i in range(1000):
        limit.take('session-%d' % i)
        assert len(limit.buckets) <= 100


def test_ballots_are_limited_beyond_the_loopback_only():
    d = settings.DEFAULTS
    assert d.limit('ballots') == '0'
    remote = settings.replace(d, host='0.0.0.0')
    assert remote.limit('ballots') == settings.REMOTE_LIMITS['ballots']
    assert parse_rate(remote.limit('ballots')) == (120, 60)
    assert settings.replace(remote, limit_ballots='0').limit('ballots') == '0'


def test_limit_ballots_option():
    import server

    def ballots(argv):
        s = server.parse_args(['-e', 'x'] + argv).settings
        return parse_rate(s.limit('ballots'))
    assert ballots([]) is None
    assert ballots(['--host', '0.0.0.0']) == (120, 60)
    assert ballots(['--host', '0.0.0.0', '--limit-ballots', '0']) is None
    assert ballots(['--limit-ballots', '5/h']) == (5, 3600)
    with pytest.raises(SystemExit) as e:
        server.parse_args(['-e', 'x', '--limit-ballots', '5/d'])
    assert e.value.code == 2


class Counting(dict):
    """A dict that counts the buckets looked up."""
    looked = 0

    def __getitem__(self, key):
        self.looked += 1
        return dict.__getitem__(self, key)


def test_a_full_table_is_swept_a_slice_at_a_time():
    """At the cap, a new address costs a look at SWEEP buckets at most,
    never a pass over the whole table: those full again go, else the older
    half of the slice."""
    from pages import limits
    limit = RateLimit(2, 1, max_addresses=limits.SWEEP * 5,
                      clock=lambda: 0.0)
    limit.buckets = Counting((n, [0.0, 0.0]) for n in range(limits.SWEEP * 5))
    assert limit.take('new') == 0
    assert limit.buckets.looked <= limits.SWEEP
    assert len(limit.buckets) == limits.SWEEP * 5 - limits.SWEEP // 2 + 1
    assert 0 not in limit.buckets and limits.SWEEP // 2 in limit.buckets
    # Full again (2 s later, at 1/s): only those of the slice go.
    limit.clock = lambda: 2.0
    limit.buckets.looked = 0
    for n in range(limits.SWEEP // 2 - 1):
        limit.take('more-%d' % n)
    assert len(limit.buckets) == limits.SWEEP * 5
    limit.take('last')
    assert limit.buckets.looked <= limits.SWEEP
    assert len(limit.buckets) == limits.SWEEP * 4 + 1
