"""The course's rules for requests: the upload limits and deadlines (Policy), and how many failed sign-ins a client
address may make (SignInLimit)."""

from __future__ import annotations

import collections
import datetime
import threading
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Policy:
    """The course's rules for uploads."""

    max_upload_bytes: int = 2 << 20
    rate_limit_s: float = 30.0
    deadlines: tuple[tuple[str, datetime.datetime], ...] = ()  # (milestone, deadline): later uploads are marked late
    default_milestone: str = "final"  # without deadlines, what uploads count for (with them: current_milestone)
    fixed_milestone: str | None = None  # the staff named one (serve --milestone): it wins over the deadlines
    device: str = "cuda"  # where the graders run: a CPU server takes Python kernels only
    signin_failures: int = 20  # failed sign-ins a client address may make per signin_window_s; then 429
    signin_window_s: float = 60.0

    def deadline(self, milestone: str) -> datetime.datetime | None:
        return dict(self.deadlines).get(milestone)

    def current_milestone(self, at: datetime.datetime | None = None) -> str:
        """What an upload counts for unless it says, and the gradebook's default: with deadlines, the first milestone
        whose deadline has not passed (by time), else the last; without, default_milestone. One the staff named
        (fixed_milestone) wins."""
        if self.fixed_milestone:
            return self.fixed_milestone
        if not self.deadlines:
            return self.default_milestone
        at = at or datetime.datetime.now(datetime.timezone.utc)
        by_time = sorted(self.deadlines, key=lambda d: d[1])
        return next((name for name, when in by_time if when >= at), by_time[-1][0])


class SignInLimit:
    """Failed sign-ins per client address in a sliding window. Once an address is over the limit every sign-in from
    it is refused unchecked (429) until its oldest failure leaves the window, so guessing gets no answer at all."""

    MAX_ADDRESSES = 10000  # the oldest forgotten beyond this (many addresses, each a few failures)

    def __init__(self, failures: int, window_s: float):
        self.failures, self.window_s = failures, window_s
        self._seen: collections.OrderedDict[str, collections.deque] = collections.OrderedDict()
        self._lock = threading.Lock()

    def _recent(self, address: str, at: float) -> collections.deque:
        times = self._seen.get(address)
        if times is None:
            return collections.deque()
        while times and times[0] <= at - self.window_s:
            times.popleft()
        if not times:
            del self._seen[address]
        return times

    def wait_s(self, address: str) -> float:
        """Seconds until `address` may try again (0: now)."""
        at = time.monotonic()
        with self._lock:
            times = self._recent(address, at)
            return max(0.0, times[0] + self.window_s - at) if len(times) >= self.failures else 0.0

    def failed(self, address: str) -> None:
        at = time.monotonic()
        with self._lock:
            times = self._recent(address, at)
            self._seen[address] = times
            self._seen.move_to_end(address)
            times.append(at)
            while len(self._seen) > self.MAX_ADDRESSES:
                self._seen.popitem(last=False)
