"""The Django ORM driver beyond the contract suite: a vote queued in the
ORM's one thread behind work that holds it is answered within its timeout
(outcome unknown), and is not applied when that work ends: its ballots
still vote."""
import asyncio
import secrets
import time
import uuid

import pytest

pytest.importorskip('django')

from asgiref.sync import sync_to_async  # noqa: E402

from data_interface import VoteOutcome, VoteUnknown  # noqa: E402


async def test_a_vote_out_of_time_before_its_turn_does_nothing(
        postgres, django_orm_loaded):
    from data_interface.django_orm.data import DjangoData
    data = DjangoData(postgres.owner_dsn, timeout=0.5)
    await data.start()
    try:
        session = str(uuid.uuid4())
        win, lose = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
        await data.sticker_pair(session, (win, lose), 60)
        # The thread the ORM's calls run in, held past the vote's timeout.
        held = asyncio.ensure_future(sync_to_async(time.sleep)(1.5))
        await asyncio.sleep(0.1)
        began = time.monotonic()
        with pytest.raises(VoteUnknown):
            await data.cast_vote(session, win, lose)
        assert time.monotonic() - began < 1.0
        await held
        await asyncio.sleep(0.2)    # the vote's turn came
        assert data.probe is None   # no outage
        assert await data.cast_vote(session, win, lose) == VoteOutcome.OK
    finally:
        await data.close()
