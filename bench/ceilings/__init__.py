"""The ceilings under the pages (bench.py --ceilings): each database call a
page makes, timed inside the database, from Python through each driver
alone, and through HTTP; and each page rendered in-process without I/O.

Kept CPython 3.7 compatible: the driver and HTTP children run in the legacy
environment too.
"""

# The calls, in the order they are timed and reported.
CALLS = ('ranked', 'pair', 'vote', 'visits', 'stats')
# page -> the call it waits for (the vote call is the vote page's work: a
# vote, then the next pair).
PAGE_CALLS = {'good': 'ranked', 'bad': 'ranked', 'index': 'pair',
              'vote': 'vote'}
RANKED_COUNT = 9          # what /good and /bad show
VISIT_BATCH = 100         # visits per record_visits call
BALLOT_TTL = 600
# Set (to anything) in a test's environment: every call returns without
# calling, so the run must fail its checks.
SKIP_CALL = 'STICKERS_CEILINGS_SKIP_CALL'
