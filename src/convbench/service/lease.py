"""One `convbench serve` per database: a lease in the database (the server_lease row) that a server takes before it
touches the queue, renews while it runs (a heartbeat) and gives up when it stops.

A second server on a live database finds the lease held and refuses to start, naming the holder, before it starts
anything or re-queues anything (re-queueing "running" jobs is only right for jobs whose server is gone). The lease
is free to take when:
- nobody holds it (its holder stopped cleanly and gave it up);
- its holder ran on this host and that process is gone (a crash, SIGKILL): taken over at once;
- its last heartbeat is older than TTL_S (a holder on another host, or one whose process we cannot see).
Taking it is a compare-and-swap on the row's generation, so two servers starting together cannot both win. A server
whose heartbeat has not been written for TTL_S may have been taken over: it stops dispatching and exits.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from typing import Callable

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import sessionmaker

from convbench.core import ui
from convbench.core.errors import UsageError
from convbench.service.db import ServerLease, now

TTL_S = 30.0  # a holder silent this long is taken to be gone (hosts' clocks must agree to well within it)
HEARTBEAT_S = 5.0
ROW = 1


def _alive_here(pid: int | None) -> bool:
    """Whether process `pid` runs on this host (a zombie does not: it is dead, only not yet reaped). A pid reused by
    another process reads as alive: the lease then waits for its TTL, the safe way to be wrong."""
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
    except (OSError, IndexError):
        pass  # no /proc: ask the kernel below
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process with that pid: alive
        return True
    return True


def describe(row: ServerLease) -> str:
    """The holder, in words: pid, host, address, how long ago it was last heard from."""
    age = (now() - row.heartbeat).total_seconds() if row.heartbeat else None
    return (f"pid {row.pid} on host {row.host}" + (f", {row.url}" if row.url else "")
            + (f", last heartbeat {age:.0f} s ago" if age is not None else ""))


class Lease:
    """This server's claim on the database's queue."""

    def __init__(self, sessions: sessionmaker, url: str = "", ttl_s: float = TTL_S, heartbeat_s: float = HEARTBEAT_S):
        self.sessions, self.url, self.ttl_s, self.heartbeat_s = sessions, url, ttl_s, heartbeat_s
        self.id = uuid.uuid4().hex
        self.host, self.pid = socket.gethostname()[:255], os.getpid()
        self.lost = threading.Event()
        self._last_ok = 0.0  # time.monotonic() of the last heartbeat written
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------------------------------------- taking it

    def _row(self) -> ServerLease:
        with self.sessions() as s:
            row = s.get(ServerLease, ROW)
        if row is not None:
            return row
        try:  # a database whose row was deleted by hand: put the free row back
            with self.sessions.begin() as s:
                s.add(ServerLease(id=ROW, generation=0))
        except IntegrityError:
            pass  # another server put it back first
        with self.sessions() as s:
            return s.get(ServerLease, ROW)

    def takeable(self, row: ServerLease) -> bool:
        if row.holder is None or row.heartbeat is None:
            return True
        if row.host == self.host and not _alive_here(row.pid):
            return True
        return (now() - row.heartbeat).total_seconds() > self.ttl_s

    def acquire(self, database: str) -> None:
        """Take the lease, or a UsageError naming who holds it (nothing else touched)."""
        row = self._row()
        if self.takeable(row):
            stamp = now()
            with self.sessions.begin() as s:
                won = s.execute(update(ServerLease).where(
                    ServerLease.id == ROW, ServerLease.generation == row.generation).values(
                    holder=self.id, host=self.host, pid=self.pid, url=self.url[:255], acquired=stamp, heartbeat=stamp,
                    generation=row.generation + 1)).rowcount == 1
            if won:
                self._last_ok = time.monotonic()
                if row.holder is not None:
                    ui.note(f"serve: took over the database from a server that is gone ({describe(row)})")
                return
            row = self._row()  # another server took it between our read and our write
        raise self._held_by(row, database)

    def _held_by(self, row: ServerLease, database: str) -> UsageError:
        return UsageError(f"the database {database} is in use by another `convbench serve` ({describe(row)}); stop "
                          f"that one first (a server gives the database up when it stops; one that died is taken "
                          f"over at once on its own host, elsewhere {self.ttl_s:.0f} s after its last heartbeat)")

    def refuse_if_held(self, database: str) -> None:
        """Before the schema is brought up to date: a live server's database is not touched at all (a newer
        convbench would otherwise migrate it under that server). A database without the lease table yet, or one
        that cannot be read, is left to the migration and its own messages."""
        try:
            with self.sessions() as s:
                row = s.get(ServerLease, ROW)
        except SQLAlchemyError:
            return
        if row is not None and not self.takeable(row):
            raise self._held_by(row, database)

    # ------------------------------------------------------------------------------------------------ holding it

    def held(self) -> bool:
        """Whether this server may act on the queue now: it took the lease, has not lost it, and wrote a heartbeat
        within the TTL (else another server may already have taken over)."""
        return (self._last_ok > 0 and not self.lost.is_set()
                and time.monotonic() - self._last_ok < self.ttl_s)

    def beat(self) -> bool:
        """Renew the lease (False: another server holds it now)."""
        with self.sessions.begin() as s:
            kept = s.execute(update(ServerLease).where(ServerLease.id == ROW, ServerLease.holder == self.id).values(
                heartbeat=now(), generation=ServerLease.generation + 1)).rowcount == 1
        if kept:
            self._last_ok = time.monotonic()
        else:
            self.lost.set()
        return kept

    def start_heartbeat(self, on_lost: Callable[[str], None]) -> None:
        """A daemon thread renewing the lease every heartbeat_s; on_lost(why) once the lease is gone or can no
        longer be renewed within the TTL."""

        def loop() -> None:
            while not self._stop.wait(self.heartbeat_s):
                try:
                    if not self.beat():
                        why = "another server took over the database"
                        break
                except Exception as e:  # noqa: BLE001 - a database hiccup: tried again at the next beat
                    first = str(e).strip().splitlines()
                    ui.note(f"serve: lease heartbeat: {type(e).__name__}: {first[0] if first else ''}")
                if not self.held():
                    why = f"its heartbeat could not be written for {self.ttl_s:.0f} s"
                    break
            else:
                return
            self.lost.set()
            on_lost(why)

        self._thread = threading.Thread(target=loop, name="convbench-lease", daemon=True)
        self._thread.start()

    def release(self) -> None:
        """Give the lease up (a clean stop): the next server starts at once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.heartbeat_s + 10)
        try:
            with self.sessions.begin() as s:
                s.execute(update(ServerLease).where(ServerLease.id == ROW, ServerLease.holder == self.id).values(
                    holder=None, heartbeat=None, generation=ServerLease.generation + 1))
        except Exception:  # noqa: BLE001 - the lease then expires by itself after the TTL
            pass


def database_name(sessions: sessionmaker) -> str:
    """The database's URL without its password, for messages."""
    return sessions.kw["bind"].url.render_as_string(hide_password=True)
