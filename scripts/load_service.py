"""Load benchmark of the grading service (not a test): does it grade a class's burst exactly once, and do its pages
stay quick while it grades?

It starts its own `convbench serve` (its own process group, a local Dask cluster of --workers CPU graders, fast
grading settings, no rate limit) on a temporary SQLite database (or --db URL), makes --teams teams, and submits
--submissions Python kernel files from those teams at once (--clients threads, httpx, round-robin over the teams).
While they are graded a background loop GETs /, /api/leaderboard, /api/health and one team's /api/submissions/ID,
one request at a time, over and over. At the end it prints:

    the count graded, and that each was graded exactly once (state done, exactly one "graded" event) and none was
    lost (every acknowledged upload is one row in its team's history, and no row is extra);
    p50 / p95 / max latency per page in ms (and of the uploads themselves, for information);
    the total wall time and the grading throughput.

Exit 0 when every check holds and every page's p95 is at most --max-p95-ms (300), else 1.

    .venv/bin/python scripts/load_service.py                                  # 200 submissions, 50 teams, 2 graders
    .venv/bin/python scripts/load_service.py --submissions 40 --teams 10      # a quick one
    .venv/bin/python scripts/load_service.py --db postgresql+psycopg://USER:PASS@HOST/DB --keep

The teams are named load-RUN-NNN (RUN: random), so --db may point at a database that holds other teams; its health
counts are the whole database's, though, so it waits until nothing at all is queued or running there.
"""

from __future__ import annotations

import argparse
import datetime
import math
import shutil
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from convbench.service.process import ServeProcess

KERNEL = "import torch.nn.functional as F\n\n\ndef conv_forward(x, k):\n    return F.conv2d(x, k)\n"
PAGES = ("/", "/api/leaderboard", "/api/health", "/api/submissions/ID")


def note(message: str) -> None:
    print(f"load: {message}", file=sys.stderr, flush=True)


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return math.nan
    return sorted_values[max(0, math.ceil(p / 100 * len(sorted_values)) - 1)]


class Prober:
    """A background loop: GET each page in turn, one request at a time, and keep (page, seconds, status)."""

    def __init__(self, url: str, pause: float):
        self.url, self.pause = url, pause
        self.samples: dict[str, list[float]] = {page: [] for page in PAGES}
        self.errors: dict[str, list[str]] = {page: [] for page in PAGES}
        self.target: tuple[int, str] | None = None  # (submission id, its team's token) once there is one
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="prober", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def _loop(self) -> None:
        with httpx.Client(base_url=self.url, timeout=60) as http:
            while not self._stop.is_set():
                for page in PAGES:
                    headers, path = {}, page
                    if page.endswith("/ID"):
                        if self.target is None:
                            continue
                        sub_id, token = self.target
                        path, headers = f"/api/submissions/{sub_id}", {"Authorization": f"Bearer {token}"}
                    t0 = time.perf_counter()
                    try:
                        reply = http.get(path, headers=headers)
                        status = reply.status_code
                    except httpx.HTTPError as e:
                        status, reply = None, e
                    elapsed = time.perf_counter() - t0
                    if status == 200:
                        self.samples[page].append(elapsed)
                    else:
                        self.errors[page].append(f"{status}: {str(getattr(reply, 'text', reply))[:200]}")
                if self.pause:
                    self._stop.wait(self.pause)


def make_teams(db: str, count: int) -> list[tuple[str, str]]:
    """(name, token) of `count` new teams, through the service's own store (what `convbench teams add` does, without
    a process per team)."""
    from convbench.service import db as service_db
    from convbench.service import store

    run = uuid.uuid4().hex[:6]
    sessions = service_db.connect(db)
    try:
        return [(name, store.add_team(sessions, name)) for name in (f"load-{run}-{i:03d}" for i in range(count))]
    finally:
        sessions.kw["bind"].dispose()


def hide_password(url: str) -> str:
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001
        return url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--submissions", type=int, default=200, help="uploads in the burst (200)")
    parser.add_argument("--teams", type=int, default=50, help="teams they come from, round-robin (50)")
    parser.add_argument("--workers", type=int, default=2, help="CPU graders in the server's local cluster (2)")
    parser.add_argument("--db", help="database URL (default: SQLite in the server's temporary folder)")
    parser.add_argument("--sizes", default="10", help="serve --sizes (10: fast)")
    parser.add_argument("--shapes", type=int, default=1, help="serve --shapes (1)")
    parser.add_argument("--repeats", type=int, default=1, help="serve --repeats (1)")
    parser.add_argument("--clients", type=int, default=16, help="threads that upload at once (16)")
    parser.add_argument("--pause", type=float, default=0.05, help="s between the prober's rounds of the pages (0.05)")
    parser.add_argument("--max-p95-ms", type=float, default=300.0, help="fail when a page's p95 is over this (300)")
    parser.add_argument("--timeout", type=float, default=7200, help="give up waiting for the grades after s (7200)")
    parser.add_argument("--keep", action="store_true", help="keep the server's folder (database, serve.log)")
    args = parser.parse_args(argv)
    if args.submissions < 1 or args.teams < 1 or args.workers < 1 or args.clients < 1:
        parser.error("--submissions, --teams, --workers and --clients must be at least 1")

    folder = Path(tempfile.mkdtemp(prefix="convbench-load-"))
    db = args.db or f"sqlite:///{folder / 'service.db'}"
    server = ServeProcess(db, folder, ["--device", "cpu", "--workers", str(args.workers), "--sizes", args.sizes,
                                       "--shapes", str(args.shapes), "--repeats", str(args.repeats),
                                       "--rate-limit", "0"])
    started = time.monotonic()
    failures: list[str] = []
    try:
        note(f"{args.teams} teams on {hide_password(db)}")
        teams = make_teams(db, args.teams)
        note(f"serve on {server.url}: {args.workers} CPU grader(s), sizes {args.sizes}, shapes {args.shapes}, "
             f"repeats {args.repeats}, rate limit 0")
        server.start()
        up = time.monotonic()
        prober = Prober(server.url, args.pause)
        prober.start()

        # ------------------------------------------------------------------------------------------- the burst
        accepted: dict[int, tuple[str, str]] = {}  # submission id -> (team, token)
        upload_s: list[float] = []
        refused: list[str] = []
        lock = threading.Lock()

        def submit(i: int, http: httpx.Client) -> None:
            name, token = teams[i % len(teams)]
            body = KERNEL + f"# load submission {i} of team {name}\n"
            t0 = time.perf_counter()
            try:
                reply = http.post("/api/submissions", headers={"Authorization": f"Bearer {token}"},
                                  files={"file": (f"kernel_{i:04d}.py", body.encode(), "text/x-python")})
            except httpx.HTTPError as e:
                with lock:
                    refused.append(f"#{i}: {type(e).__name__}: {e}")
                return
            elapsed = time.perf_counter() - t0
            with lock:
                if reply.status_code == 202:
                    sub_id = int(reply.json()["id"])
                    accepted[sub_id] = (name, token)
                    upload_s.append(elapsed)
                    if prober.target is None and name == teams[0][0]:
                        prober.target = (sub_id, token)
                else:
                    refused.append(f"#{i}: {reply.status_code} {reply.text[:200]}")

        burst = time.monotonic()
        limits = httpx.Limits(max_connections=args.clients, max_keepalive_connections=args.clients)
        with httpx.Client(base_url=server.url, timeout=120, limits=limits) as http, \
                ThreadPoolExecutor(max_workers=args.clients) as pool:
            list(pool.map(lambda i: submit(i, http), range(args.submissions)))
        burst_s = time.monotonic() - burst
        note(f"{len(accepted)} of {args.submissions} uploads acknowledged in {burst_s:.1f} s"
             + (f"; {len(refused)} refused" if refused else ""))
        if prober.target is None and accepted:
            first = min(accepted)
            prober.target = (first, accepted[first][1])

        # ------------------------------------------------------------------------------------------ the grading
        deadline = time.monotonic() + args.timeout
        last_note = 0.0
        counts: dict = {}
        with httpx.Client(base_url=server.url, timeout=60) as http:
            while True:
                try:
                    counts = http.get("/api/health").json()["queue"]
                except (httpx.HTTPError, ValueError, KeyError) as e:
                    counts = {"error": str(e)}
                pending = counts.get("queued", 0) + counts.get("running", 0) if "error" not in counts else 1
                if time.monotonic() - last_note > 15 or not pending:
                    note(f"{time.monotonic() - burst:5.0f} s: {counts}")
                    last_note = time.monotonic()
                if not pending:
                    break
                if server.proc is not None and server.proc.poll() is not None:
                    failures.append(f"the server exited with status {server.proc.returncode} while grading")
                    break
                if time.monotonic() > deadline:
                    failures.append(f"still {pending} queued or running after {args.timeout:g} s: {counts}")
                    break
                time.sleep(1.0)
        graded_s = time.monotonic() - burst
        prober.stop()

        # -------------------------------------------------------------------------------------------- the checks
        verdicts: dict[str, int] = {}
        states: dict[str, int] = {}
        once = lost = extra = 0
        job_s: list[float] = []
        wait_s: list[float] = []
        sent_more_than_once = 0
        problems: list[str] = []
        with httpx.Client(base_url=server.url, timeout=60) as http:
            rows: set[int] = set()
            for name, token in teams:
                reply = http.get(f"/api/teams/{name}", headers={"Authorization": f"Bearer {token}"})
                if reply.status_code != 200:
                    problems.append(f"/api/teams/{name}: {reply.status_code} {reply.text[:200]}")
                    continue
                rows.update(s["id"] for s in reply.json()["submissions"])
            lost = len(set(accepted) - rows)
            extra = len(rows - set(accepted))
            for sub_id, (name, token) in sorted(accepted.items()):
                reply = http.get(f"/api/submissions/{sub_id}", headers={"Authorization": f"Bearer {token}"})
                if reply.status_code != 200:
                    problems.append(f"#{sub_id}: {reply.status_code} {reply.text[:200]}")
                    continue
                sub = reply.json()
                states[sub["state"]] = states.get(sub["state"], 0) + 1
                verdicts[str(sub["verdict"])] = verdicts.get(str(sub["verdict"]), 0) + 1
                whats = [e["what"] for e in sub["events"]]
                graded = sum(w.startswith("graded") for w in whats)
                sent = sum(w.startswith("sent to the cluster") for w in whats)
                sent_more_than_once += sent > 1
                if sub["state"] == "done" and graded == 1:
                    once += 1
                elif len(problems) < 20:
                    problems.append(f"#{sub_id} ({name}): state {sub['state']}, {graded} graded event(s): {whats}")
                if sub["team"] != name:
                    problems.append(f"#{sub_id}: team {sub['team']}, uploaded by {name}")
                result = sub.get("result") or {}
                if result.get("seconds") is not None:
                    job_s.append(float(result["seconds"]))
                if sub["finished"]:
                    created = datetime.datetime.fromisoformat(sub["created"])
                    finished = datetime.datetime.fromisoformat(sub["finished"])
                    wait_s.append((finished - created).total_seconds())
            boards = http.get("/api/leaderboard").json()
            ranked_teams = {r["team"] for board in boards.values() for r in board} & {n for n, _ in teams}

        total_s = time.monotonic() - started
        n = len(accepted)
        print(f"submissions: {args.submissions} uploaded from {args.teams} teams by {args.clients} threads, "
              f"{n} acknowledged (202) in {burst_s:.1f} s" + (f", {len(refused)} refused" if refused else ""))
        print(f"graded: {states.get('done', 0)} of {n} done ({states}); verdicts {verdicts}")
        print(f"graded exactly once (done, one 'graded' event): {once} of {n}; sent to the cluster more than once: "
              f"{sent_more_than_once}")
        print(f"rows: {len(rows)} in the teams' histories; lost (acknowledged, no row): {lost}; extra (row, never "
              f"acknowledged): {extra}")
        print(f"leaderboard: {len(ranked_teams)} of {args.teams} teams ranked")
        print(f"grading: {args.workers} CPU grader(s), sizes {args.sizes}; burst to last grade {graded_s:.1f} s, "
              f"{n / graded_s if graded_s else 0:.2f} submissions/s; per job median "
              f"{percentile(sorted(job_s), 50):.1f} s on its worker; upload to grade p50 "
              f"{percentile(sorted(wait_s), 50):.1f} s, max {percentile(sorted(wait_s), 100):.1f} s")
        print(f"latency while grading (ms; {args.max_p95_ms:g} ms p95 allowed), one request at a time:")
        print(f"  {'page':<24}{'n':>7}{'p50':>9}{'p95':>9}{'max':>9}{'errors':>8}")
        for page in PAGES:
            values = sorted(prober.samples[page])
            p50, p95, top = (percentile(values, p) * 1000 for p in (50, 95, 100))
            print(f"  {page:<24}{len(values):>7}{p50:>9.1f}{p95:>9.1f}{top:>9.1f}{len(prober.errors[page]):>8}")
            if not values:
                failures.append(f"{page}: no successful request measured")
            elif p95 > args.max_p95_ms:
                failures.append(f"{page}: p95 {p95:.1f} ms > {args.max_p95_ms:g} ms")
            if prober.errors[page]:
                failures.append(f"{page}: {len(prober.errors[page])} failed request(s), e.g. {prober.errors[page][0]}")
        values = sorted(upload_s)
        print(f"  {'POST /api/submissions':<24}{len(values):>7}{percentile(values, 50) * 1000:>9.1f}"
              f"{percentile(values, 95) * 1000:>9.1f}{percentile(values, 100) * 1000:>9.1f}{len(refused):>8}"
              f"   (the uploads, {args.clients} at once: for information, not checked)")
        print(f"wall time: {total_s:.1f} s (server up in {up - started:.1f} s, incl. making the teams)")

        if len(accepted) != args.submissions:
            failures.append(f"{args.submissions - len(accepted)} upload(s) not acknowledged: {refused[:3]}")
        if once != n:
            failures.append(f"{n - once} submission(s) not graded exactly once")
        if lost or extra:
            failures.append(f"{lost} lost, {extra} extra row(s)")
        failures.extend(problems[:20])
    except Exception as e:  # noqa: BLE001 - a benchmark that breaks says why and still stops its server
        failures.append(f"{type(e).__name__}: {e}")
    finally:
        server.stop()
        if failures:
            note(f"the server's log ends:\n{server.tail(2000)}")
        if args.keep:
            note(f"kept {folder} (serve.log{', service.db' if not args.db else ''})")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    if failures:
        print("FAIL:")
        for line in failures:
            print(f"  {line}")
        if not args.keep:
            print("  (--keep keeps the server's log)")
        return 1
    print("OK: every upload graded exactly once, none lost, every page's p95 within bounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
