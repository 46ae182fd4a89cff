"""The service's tables and the database behind them.

SQLite by default (a file beside the uploads, no set-up); PostgreSQL for a deployment (`--db
postgresql+psycopg://...`). The schema is Alembic's (migrations/): `connect` brings any database to the newest
revision before use, so an older deployment is upgraded in place and a new one is created.

Tables:
    teams        a team (or a staff account): its name and the SHA-256 of its token (never the token itself)
    submissions  one upload: the archive of its files (stored with the row, before the upload is acknowledged),
                 its state (queued -> running -> done | failed), while it runs the grader's step, the grade
                 (JSON), where and when it ran
    events       what happened to a submission (queued, started on a worker, re-queued, graded, hidden, ...)
    server_lease one row: the `convbench serve` that owns the queue (holder, host, pid, heartbeat; lease.py)
"""

from __future__ import annotations

import datetime
from pathlib import Path

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    Text,
    create_engine,
    event,
)
from sqlalchemy.engine import Engine
from sqlalchemy.types import TypeDecorator
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker

from convbench.core.errors import UsageError

MIGRATIONS = Path(__file__).with_name("migrations")
# the newest revision: migrations are numbered in order (versions/NNNN_what.py, revision "NNNN"), one line of them
HEAD_REVISION = max(p.name[:4] for p in (MIGRATIONS / "versions").glob("[0-9][0-9][0-9][0-9]_*.py"))


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


class UTCDateTime(TypeDecorator):
    """A moment in UTC, read back aware on every database (SQLite keeps no zone: it is put back)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_result_value(self, value, dialect):
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=datetime.timezone.utc)
        return value


class Base(DeclarativeBase):
    pass


class Team(Base):
    __tablename__ = "teams"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    staff: Mapped[bool] = mapped_column(Boolean, default=False)
    banned: Mapped[bool] = mapped_column(Boolean, default=False)
    created: Mapped[datetime.datetime] = mapped_column(UTCDateTime, default=now)


class Submission(Base):
    __tablename__ = "submissions"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"), index=True)
    filename: Mapped[str] = mapped_column(String(255))  # what was uploaded: a file name, or a folder's
    archive: Mapped[bytes] = mapped_column(LargeBinary)  # the files, as a gzip'd tar
    sha256: Mapped[str] = mapped_column(String(64))
    milestone: Mapped[str] = mapped_column(String(32), default="final")
    late: Mapped[bool] = mapped_column(Boolean, default=False)
    hidden: Mapped[bool] = mapped_column(Boolean, default=False)
    state: Mapped[str] = mapped_column(String(16), default="queued", index=True)  # queued running done failed
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    seed: Mapped[int] = mapped_column(Integer)  # the random shapes' seed: secret, staff only
    created: Mapped[datetime.datetime] = mapped_column(UTCDateTime, default=now, index=True)
    started: Mapped[datetime.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    finished: Mapped[datetime.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    worker: Mapped[str | None] = mapped_column(String(255), nullable=True)
    # "one grader": the next run goes to a single worker the dispatcher picks, the same for every pinned job (a
    # board's re-timing); a worker's address once picked
    pinned_worker: Mapped[str | None] = mapped_column(String(255), nullable=True)
    gpu: Mapped[str | None] = mapped_column(String(128), nullable=True)  # the GPU kind it ran on (or the CPU)
    verdict: Mapped[str | None] = mapped_column(String(32), nullable=True)
    op_time_s: Mapped[float | None] = mapped_column(Float, nullable=True)  # Σ Op Time at the largest size, when ranked
    ranked: Mapped[bool] = mapped_column(Boolean, default=False)  # correct, and no flag
    result: Mapped[dict | None] = mapped_column(JSON, nullable=True)  # the grade, the machine, the flags
    # while it runs: the grader's current step (jobs.progress: a name from the trusted grader, never the kernel's
    # output), its place among the job's steps, and when it began
    step: Mapped[str | None] = mapped_column(String(64), nullable=True)
    step_index: Mapped[int | None] = mapped_column(Integer, nullable=True)
    step_count: Mapped[int | None] = mapped_column(Integer, nullable=True)
    step_started: Mapped[datetime.datetime | None] = mapped_column(UTCDateTime, nullable=True)


class ServerLease(Base):
    """Which `convbench serve` owns the queue: one row (id 1), written only through lease.py."""

    __tablename__ = "server_lease"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    holder: Mapped[str | None] = mapped_column(String(64), nullable=True)  # a random id per serve; None: free
    host: Mapped[str | None] = mapped_column(String(255), nullable=True)
    pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    url: Mapped[str | None] = mapped_column(String(255), nullable=True)  # where that serve listens
    acquired: Mapped[datetime.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    heartbeat: Mapped[datetime.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # bumped by every write: a take-over is a compare-and-swap on it, so two starting servers cannot both win
    generation: Mapped[int] = mapped_column(Integer, default=0)


class Event(Base):
    __tablename__ = "events"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"), index=True)
    at: Mapped[datetime.datetime] = mapped_column(UTCDateTime, default=now)
    what: Mapped[str] = mapped_column(Text)


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")  # readers (the pages) do not wait for the dispatcher's writes
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


def engine_for(url: str) -> Engine:
    """An engine for a database URL (sqlite:///PATH, postgresql+psycopg://...), or a one-line UsageError."""
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")  # psycopg 3, the driver we install
    if url.startswith("postgresql+psycopg://"):
        from importlib.util import find_spec

        if find_spec("psycopg") is None:  # an extra of its own: the SQLite default needs no driver
            raise UsageError("--db: a PostgreSQL database needs the psycopg driver, which is not installed; "
                             "pip install 'convbench[postgres]'")
    try:
        if url.startswith("sqlite"):
            engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 10})
            event.listen(engine, "connect", _sqlite_pragmas)
            return engine
        return create_engine(url, pool_pre_ping=True)
    except Exception as e:  # noqa: BLE001 - an unknown dialect, a missing driver: one line
        raise UsageError(f"--db {url!r}: {str(e).splitlines()[0] if str(e) else type(e).__name__}; give "
                         "sqlite:///PATH or postgresql://USER:PASSWORD@HOST/DB") from None


def local_folder(url: str) -> Path | None:
    """The folder of an SQLite database file (the sandbox hides it from kernels); None for a server database."""
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except Exception:  # noqa: BLE001 - engine_for reports a bad URL
        return None
    if not parsed.drivername.startswith("sqlite") or not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database).resolve().parent


def at_head(engine: Engine) -> bool:
    """Whether the database already has the newest schema: read without Alembic, whose import and upgrade
    would double the time of a command such as `convbench teams list`."""
    from sqlalchemy import inspect, text

    with engine.connect() as connection:
        if not inspect(connection).has_table("alembic_version"):
            return False
        return connection.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == [HEAD_REVISION]


def migrate(engine: Engine) -> None:
    """Bring the database to the newest schema (Alembic upgrade head), creating it when empty."""
    if at_head(engine):
        return
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def unmigrated(url: str) -> sessionmaker | None:
    """Sessions on the database at `url` as it is (no migration), for reading it before deciding to change it; None
    for an SQLite file that does not exist yet (opening it would create it)."""
    from sqlalchemy.engine import make_url

    engine = engine_for(url)
    if engine.url.drivername.startswith("sqlite"):
        database = make_url(url).database
        if not database or database == ":memory:" or not Path(database).is_file():
            engine.dispose()
            return None
    return sessionmaker(engine, expire_on_commit=False)


def connect(url: str) -> sessionmaker:
    """Sessions on the database at `url`, its schema brought up to date first; a database that cannot be reached
    is a one-line UsageError."""
    engine = engine_for(url)
    try:
        migrate(engine)
    except UsageError:
        raise
    except Exception as e:  # noqa: BLE001 - refused connection, bad password, read-only file: one line
        first = str(getattr(e, "orig", None) or e).strip().splitlines()
        raise UsageError(f"cannot open the database {engine.url.render_as_string(hide_password=True)}: "
                         f"{first[0] if first else type(e).__name__}") from None
    return sessionmaker(engine, expire_on_commit=False)
