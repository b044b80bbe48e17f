"""Rate limits: a token bucket per client address (or per session), in
bounded memory."""
import ipaddress
import itertools
import math
import re
import time

PERIODS = {'s': 1, 'm': 60, 'h': 3600}
RATE = re.compile(r'\A([0-9]+)(?:/([smh]))?\Z')
MAX_ADDRESSES = 100000
# Addresses a sweep looks at: a slice of work per new address once full
# (100,000 at once held the loop 18-37 ms), well under a millisecond.
SWEEP = 1000


def parse_rate(text):
    """'N/s', 'N/m', 'N/h' or 'N' (per second) -> (N, seconds), or None
    for 0 (off); ValueError if malformed."""
    found = RATE.match(text.strip())
    if not found:
        raise ValueError('a rate is N/s, N/m or N/h, not %r' % text)
    count = int(found.group(1))
    return (count, PERIODS[found.group(2) or 's']) if count else None


def client_of(ip):
    """What per-IP limits count an address as: an IPv6 address by its /64
    (a single host usually has a whole /64, so per address it could take
    2^64 buckets); IPv4 and IPv4-mapped IPv6 by the address."""
    if not isinstance(ip, str) or ':' not in ip:
        return ip
    try:
        address = ipaddress.IPv6Address(ip)
    except ValueError:
        return ip
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return address.packed[:8]


class RateLimit:
    """Up to `count` at once per key (an address, a session), refilled at
    `count` per `period` seconds. take() -> 0 if allowed, else the seconds
    to wait."""

    def __init__(self, count, period, max_addresses=MAX_ADDRESSES,
                 clock=time.monotonic):
        self.burst = float(count)
        self.rate = count / float(period)
        self.retry_after = max(1, int(math.ceil(1 / self.rate)))
        self.max_addresses = max_addresses
        self.clock = clock
        self.buckets = {}   # address -> [tokens, when], oldest first

    def take(self, address):
        now = self.clock()
        bucket = self.buckets.get(address)
        if bucket is None:
            if len(self.buckets) >= self.max_addresses:
                self._sweep(now)
            self.buckets[address] = [self.burst - 1, now]
            return 0
        tokens = min(self.burst, bucket[0] + (now - bucket[1]) * self.rate)
        bucket[1] = now
        if tokens >= 1:
            bucket[0] = tokens - 1
            return 0
        bucket[0] = tokens
        return self.retry_after

    def _sweep(self, now):
        """Of the SWEEP addresses first taken, forget those whose bucket
        is full again; if none is, the older half of them."""
        full = self.burst / self.rate
        buckets = self.buckets
        oldest = list(itertools.islice(buckets, SWEEP))
        gone = [a for a in oldest if now - buckets[a][1] >= full]
        for address in gone or oldest[:max(1, len(oldest) // 2)]:
            del buckets[address]
