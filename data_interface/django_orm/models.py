"""The site's tables as Django models: plain columns, one row per thing
(not the JSONB documents of ../postgres/schema.sql), in tables of their own
(orm_*), made by Django's migrations."""
from django.db import models


class Pack(models.Model):
    name = models.TextField(primary_key=True)
    title = models.TextField()

    class Meta:
        db_table = 'orm_packs'


class Sticker(models.Model):
    id = models.IntegerField(primary_key=True)
    # A pack's name, not a foreign key: a sticker may name a pack not
    # loaded (its title is then its pack's name), as in sticker_cards.
    pack = models.TextField()
    image = models.TextField()
    rating = models.IntegerField()
    votes_plus = models.IntegerField()
    votes_minus = models.IntegerField()

    class Meta:
        db_table = 'orm_stickers'
        indexes = [models.Index(fields=['rating', 'id'],
                                name='orm_stickers_rating'),
                   models.Index(fields=['pack', 'id'],
                                name='orm_stickers_pack')]


class Ballot(models.Model):
    token = models.CharField(max_length=22, primary_key=True)
    session = models.CharField(max_length=36)
    sticker = models.IntegerField()
    partner = models.CharField(max_length=22)
    deadline = models.FloatField(db_index=True)     # Unix seconds

    class Meta:
        db_table = 'orm_ballots'


class Visitor(models.Model):
    """A session: pages.sessions' uuid, its last visit, its visits."""
    uuid = models.CharField(max_length=36, primary_key=True)
    last_seen = models.FloatField(db_index=True)    # Unix seconds
    visits = models.BigIntegerField()
    ip = models.TextField()
    user_agent = models.TextField()

    class Meta:
        db_table = 'orm_visitors'


class Counter(models.Model):
    """The site's counters, spread over COUNTERS rows (their sums are the
    site's): with one row, every batch of visits and every vote would wait
    for the commit of the one before."""
    id = models.SmallIntegerField(primary_key=True)
    users = models.BigIntegerField(default=0)
    views = models.BigIntegerField(default=0)
    votes = models.BigIntegerField(default=0)

    class Meta:
        db_table = 'orm_counters'


class Limits(models.Model):
    """The sweep's limits, one row: sessions idle longer than session_ttl
    seconds go, then the oldest sessions and ballots beyond the caps."""
    id = models.SmallIntegerField(primary_key=True, default=1)
    session_ttl = models.FloatField(default=900)
    max_sessions = models.BigIntegerField(default=1000000)
    max_ballots = models.BigIntegerField(default=1000000)

    class Meta:
        db_table = 'orm_limits'


COUNTERS = 32
