"""The site's tables as SQLAlchemy 2 declarative mapped classes, in a
PostgreSQL schema of their own (SCHEMA) beside the JSONB rows of
../postgres/schema.sql: plain columns, one row per thing. Times are Unix
seconds, as there."""
from sqlalchemy import (BigInteger, Boolean, Float, Index, Integer, MetaData,
                        Text, text)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

SCHEMA = 'stickers_orm'

# The counters are spread over this many rows, and a connection updates the
# one its backend's process id picks, as schema.sql's server table does:
# with one row every view would wait for the commit of the one before.
COUNTER_ROWS = 32


class Base(DeclarativeBase):
    metadata = MetaData(schema=SCHEMA)


class Pack(Base):
    __tablename__ = 'packs'

    name: Mapped[str] = mapped_column(Text, primary_key=True)
    title: Mapped[str] = mapped_column(Text)


class Sticker(Base):
    __tablename__ = 'stickers'
    __table_args__ = (Index('stickers_rating', 'rating', 'id'),
                      Index('stickers_pack', 'pack', 'id'))

    # Ids come from the data set (gaps allowed), never from a sequence.
    id: Mapped[int] = mapped_column(Integer, primary_key=True,
                                    autoincrement=False)
    pack: Mapped[str] = mapped_column(Text)
    image: Mapped[str] = mapped_column(Text)
    rating: Mapped[int] = mapped_column(Integer)
    votes_plus: Mapped[int] = mapped_column(Integer)
    votes_minus: Mapped[int] = mapped_column(Integer)


class Ballot(Base):
    """One of a pair's two tokens: the sticker it votes for, and the other
    token of its pair (`partner`)."""
    __tablename__ = 'ballots'
    __table_args__ = (Index('ballots_deadline', 'deadline'),)

    token: Mapped[str] = mapped_column(Text, primary_key=True)
    session: Mapped[str] = mapped_column(Text)
    sticker: Mapped[int] = mapped_column(Integer)
    partner: Mapped[str] = mapped_column(Text)
    deadline: Mapped[float] = mapped_column(Float)


class SiteSession(Base):
    """A visitor's session (not SQLAlchemy's Session)."""
    __tablename__ = 'sessions'
    __table_args__ = (Index('sessions_last_seen', 'last_seen'),)

    uuid: Mapped[str] = mapped_column(Text, primary_key=True)
    last_seen: Mapped[float] = mapped_column(
        Float, server_default=text("date_part('epoch', now())"))
    visits: Mapped[int] = mapped_column(BigInteger)
    ip: Mapped[str] = mapped_column(Text)
    user_agent: Mapped[str] = mapped_column(Text)


class Counter(Base):
    """One of COUNTER_ROWS rows whose sums are the site's counters."""
    __tablename__ = 'counters'

    id: Mapped[int] = mapped_column(Integer, primary_key=True,
                                    autoincrement=False)
    users: Mapped[int] = mapped_column(BigInteger, default=0)
    views: Mapped[int] = mapped_column(BigInteger, default=0)
    votes: Mapped[int] = mapped_column(BigInteger, default=0)


class Limits(Base):
    """The sweep's limits, one row, as schema.sql's `limits`: only the
    owner changes them."""
    __tablename__ = 'limits'

    one: Mapped[bool] = mapped_column(Boolean, primary_key=True, default=True)
    session_ttl: Mapped[float] = mapped_column(Float, default=900.0)
    max_sessions: Mapped[int] = mapped_column(BigInteger, default=1000000)
    max_ballots: Mapped[int] = mapped_column(BigInteger, default=1000000)
