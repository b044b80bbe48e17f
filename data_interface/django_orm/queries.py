"""The ORM's side of the data interface: reads with Django's async query
API, and what must be atomic (a vote, a batch of visits, a batch of the
sweep, a load) as synchronous functions in transaction.atomic, which
data.py runs through sync_to_async. Importable once Django is set up
(django_settings.configure)."""
import functools
import random
import time
from collections import Counter as Tally

from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, F, Max, OuterRef, Subquery, Sum
from django.db.models.functions import Coalesce, Collate

from .. import Pack as PackRecord
from .. import Stats, Sticker as Card, VoteOutcome
from .models import COUNTERS, Ballot, Counter, Limits, Pack, Sticker, Visitor

# A sticker as the pages see it, with its pack's title (its pack's name
# where the pack is not loaded), as PostgreSQL's view sticker_cards.
CARDS = Sticker.objects.annotate(pack_title=Coalesce(
    Subquery(Pack.objects.filter(name=OuterRef('pack')).values('title')[:1]),
    F('pack')))
FIELDS = ('id', 'pack', 'image', 'rating', 'votes_plus', 'votes_minus',
          'pack_title')
PACKS = Pack.objects.annotate(count=Coalesce(Subquery(
    Sticker.objects.filter(pack=OuterRef('name')).values('pack')
    .annotate(n=Count('id')).values('n')), 0)).order_by(Collate('name', 'C'))
LOCK = "SELECT pg_advisory_lock(hashtext('sticker site orm schema'))"
UNLOCK = "SELECT pg_advisory_unlock(hashtext('sticker site orm schema'))"


class Fewer(Exception):
    """Fewer than two stickers are loaded."""


def counter():
    """The counters' row a call moves (any: their sums are the site's)."""
    return random.randint(1, COUNTERS)


def prepare():
    """The schema by Django's migrations, and the counters' and limits'
    rows; one process at a time."""
    with connection.cursor() as cursor:
        cursor.execute(LOCK)
        try:
            call_command('migrate', 'django_orm', verbosity=0)
            Counter.objects.bulk_create(
                [Counter(id=i) for i in range(1, COUNTERS + 1)],
                ignore_conflicts=True)
            Limits.objects.get_or_create(id=1)
        finally:
            cursor.execute(UNLOCK)


async def cards(queryset):
    return [Card(*row) async for row in queryset.values_list(*FIELDS)]


async def ranked(count, best):
    order = ('-rating', '-id') if best else ('rating', 'id')
    return await cards(CARDS.order_by(*order)[:count])


async def sticker(pack, sticker_id):
    row = await CARDS.filter(id=sticker_id, pack=pack).values_list(
        *FIELDS).afirst()
    return None if row is None else Card(*row)


async def pack(name):
    found = await Pack.objects.filter(name=name).afirst()
    if found is None:
        return None
    return PackRecord(found.name, found.title,
                      await cards(CARDS.filter(pack=name).order_by('id')))


async def packs():
    return [PackRecord(*row) async for row in PACKS.values_list(
        'name', 'title', 'count')]


async def stats():
    sums = await Counter.objects.aaggregate(
        users=Sum('users'), views=Sum('views'), votes=Sum('votes'))
    return Stats(await Pack.objects.acount(), await Sticker.objects.acount(),
                 sums['users'] or 0, sums['views'] or 0, sums['votes'] or 0,
                 await Visitor.objects.acount(), await Ballot.objects.acount())


async def _at_or_after(key, strictly=False):
    """The first sticker id at `key` or after it."""
    ids = Sticker.objects.order_by('id').values_list('id', flat=True)
    return await (ids.filter(id__gt=key) if strictly
                  else ids.filter(id__gte=key)).afirst()


async def sticker_pair(session, tokens, ttl):
    """Two different random stickers (a random key up to the largest id,
    then the first id at or after it, as app.lua picks them) and their
    ballots, one INSERT."""
    top = (await Sticker.objects.aaggregate(top=Max('id')))['top']
    if top is None:
        raise Fewer
    a = await _at_or_after(random.randint(1, top))
    b = await _at_or_after(random.randint(1, top))
    if b == a:
        b = await _at_or_after(a, strictly=True)
        if b is None:
            b = await Sticker.objects.order_by('id').values_list(
                'id', flat=True).afirst()
    if b is None or b == a:
        raise Fewer
    deadline = time.time() + ttl
    await Ballot.objects.abulk_create([
        Ballot(token=tokens[0], session=session, sticker=a,
               partner=tokens[1], deadline=deadline),
        Ballot(token=tokens[1], session=session, sticker=b,
               partner=tokens[0], deadline=deadline)])
    found = {c.id: c for c in await cards(CARDS.filter(id__in=(a, b)))}
    return [found[a], found[b]]


def cast_vote(session, win, lose):
    """The vote, in one transaction: both ballots locked (in token order,
    so concurrent votes neither deadlock nor both count), checked and
    consumed, both stickers locked (by id) and moved, the votes counted;
    committed with synchronous_commit on (the local cluster runs with it
    off), so no acknowledged vote is lost in a crash."""
    with transaction.atomic():
        ballots = {b.token: b for b in Ballot.objects.select_for_update()
                   .filter(token__in=(win, lose)).order_by('token')}
        w, l = ballots.get(win), ballots.get(lose)
        if w is None or l is None or win == lose:
            return VoteOutcome.UNKNOWN
        if w.partner != lose or l.partner != win:
            return VoteOutcome.NOT_PAIR
        if w.session != session:
            return VoteOutcome.FOREIGN
        if w.deadline < time.time():
            return VoteOutcome.EXPIRED
        with connection.cursor() as cursor:
            cursor.execute('SET LOCAL synchronous_commit = on')
        Ballot.objects.filter(token__in=(win, lose)).delete()
        list(Sticker.objects.select_for_update().filter(
            id__in=(w.sticker, l.sticker)).order_by('id').values_list('id'))
        Sticker.objects.filter(id=w.sticker).update(
            rating=F('rating') + 1, votes_plus=F('votes_plus') + 1)
        Sticker.objects.filter(id=l.sticker).update(
            rating=F('rating') - 1, votes_minus=F('votes_minus') + 1)
        Counter.objects.filter(id=counter()).update(votes=F('votes') + 1)
        return VoteOutcome.OK


def record_visits(visits):
    """In one transaction: each session of `visits` ((uuid, ip, user
    agent) each) moved once, by its number of visits, its last ip and
    user agent kept (in uuid order: concurrent batches lock alike); a
    new one created, and counted as a user; the views counted."""
    now = time.time()
    counts, last = Tally(), {}
    for uuid, ip, agent in visits:
        counts[uuid] += 1
        last[uuid] = (ip, agent)
    new = 0
    with transaction.atomic():
        for uuid in sorted(last):
            ip, agent = last[uuid]
            moved = Visitor.objects.filter(uuid=uuid).update(
                last_seen=now, visits=F('visits') + counts[uuid], ip=ip,
                user_agent=agent)
            if moved:
                continue
            try:
                with transaction.atomic():
                    Visitor.objects.create(
                        uuid=uuid, last_seen=now, visits=counts[uuid], ip=ip,
                        user_agent=agent)
                new += 1
            except IntegrityError:      # another batch created it since
                Visitor.objects.filter(uuid=uuid).update(
                    last_seen=now, visits=F('visits') + counts[uuid], ip=ip,
                    user_agent=agent)
        Counter.objects.filter(id=counter()).update(
            users=F('users') + new, views=F('views') + len(visits))
    return len(visits)


def _remove(model, queryset, count):
    """Remove the first `count` rows of `queryset` that no one holds."""
    if count <= 0:
        return 0
    keys = list(queryset.select_for_update(skip_locked=True)
                .values_list('pk', flat=True)[:count])
    return model.objects.filter(pk__in=keys).delete()[0]


def sweep_batch(session_ttl, max_sessions, max_ballots, batch):
    """One batch of the sweep, one transaction: ballots past their
    deadline, sessions idle longer than session_ttl, then the oldest of
    each beyond its cap, at most `batch` of each. Returns (ballots,
    sessions) removed."""
    now = time.time()
    with transaction.atomic():
        by_deadline = Ballot.objects.order_by('deadline')
        ballots = _remove(Ballot, by_deadline.filter(deadline__lt=now), batch)
        ballots += _remove(Ballot, by_deadline, min(
            batch - ballots, Ballot.objects.count() - max_ballots))
        by_age = Visitor.objects.order_by('last_seen')
        sessions = _remove(Visitor, by_age.filter(
            last_seen__lt=now - session_ttl), batch)
        sessions += _remove(Visitor, by_age, min(
            batch - sessions, Visitor.objects.count() - max_sessions))
    return ballots, sessions


def limits():
    row = Limits.objects.get(id=1)
    return row.session_ttl, row.max_sessions, row.max_ballots


def forget_visitors():
    with transaction.atomic():
        return (Ballot.objects.all().delete()[0],
                Visitor.objects.all().delete()[0])


def load_batch(packs, stickers):
    """Insert the packs and stickers not there yet; the number of stickers
    inserted."""
    with transaction.atomic():
        Pack.objects.bulk_create([Pack(name=name, title=title)
                                  for name, title in packs],
                                 ignore_conflicts=True)
        before = Sticker.objects.count()
        Sticker.objects.bulk_create([Sticker(
            id=s[0], pack=s[1], image=s[2], rating=s[3], votes_plus=s[4],
            votes_minus=s[5]) for s in stickers], ignore_conflicts=True)
        return Sticker.objects.count() - before


def close():
    """Give this thread's connection back to the pool."""
    connection.close()


def returned(function):
    """`function`, giving its thread's connection back to the pool when it
    returns (outside a request, Django would keep it)."""
    @functools.wraps(function)
    def unit(*args):
        try:
            return function(*args)
        finally:
            connection.close()
    return unit
