"""The grading service on a GPU machine, as staff would run it: `convbench serve` with one Dask worker per GPU
grades a set of real submissions, each from its own team, and the same set again with fewer workers, for the
throughput of one GPU against several in one run.

    python3 scripts/serve_on_gpus.py --out DIR --workers 2,1 --course-weights DIR SUBMISSION...

Before the passes every CUDA submission is built once (measure.grade.prebuild, into the shared $CONVBENCH_CACHE), so
no pass pays for nvcc and the passes compare grading alone. Each pass: a fresh SQLite database, `convbench serve
--workers W`, a team per submission, every upload at once through the API, then the wait until every
one is graded (or --deadline seconds). Written to DIR: service-W.json per pass (every submission's state, verdict,
worker, GPU index, Σ Op Time, seconds per grading step; the leaderboard; per-GPU job counts; the wall time),
rewritten every second so a cut run keeps what it saw, and service-summary.txt. The queue grades in upload order, so
`prefix_done_s` (when the first N were all graded) compares passes on the same work even where one was cut short.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import httpx

from convbench.measure.grade import prebuild
from convbench.service import archive, store
from convbench.service.db import connect
from convbench.service.process import ServeProcess


def _poll(client: httpx.Client, url: str, ids: dict, tokens: dict, done: dict, start: float) -> list[float]:
    """One look at every unfinished submission; the latency of each answer (a slow server shows here)."""
    latencies = []
    for i, sub_id in ids.items():
        if i in done:
            continue
        asked = time.time()
        try:
            body = client.get(f"{url}/api/submissions/{sub_id}",
                              headers={"Authorization": f"Bearer {tokens[i]}"}).json()
        except httpx.HTTPError as e:
            print(f"  poll #{sub_id}: {type(e).__name__} after {time.time() - asked:.1f} s", flush=True)
            continue
        latencies.append(time.time() - asked)
        if body["state"] in ("done", "failed"):
            body["seen_done_s"] = time.time() - start
            done[i] = body
    return latencies


def _rows(paths: list[Path], done: dict) -> list[dict]:
    rows = []
    for i, path in enumerate(paths):
        body = done.get(i)
        result = (body or {}).get("result") or {}
        machine = result.get("machine") or {}
        rows.append({"submission": str(path), "team": f"team{i:02d}", "state": body["state"] if body else "unfinished",
                     "verdict": body and body["verdict"], "gpu_index": machine.get("gpu_index"),
                     "gpu": machine.get("gpu"), "driver": machine.get("driver"), "threads": machine.get("threads"),
                     "sm_clock_mhz": machine.get("sm_clock_mhz"), "temperature_c": machine.get("temperature_c"),
                     "op_time_s": body and body["op_time_s"], "ranked": body and body["ranked"],
                     "seconds": result.get("seconds"), "steps_s": (result.get("grade") or {}).get("seconds"),
                     "done_at_s": body and body["seen_done_s"]})
    return rows


def prefix_times(rows: list[dict]) -> list[float | None]:
    """For N = 1, 2, ...: when the first N submissions (in upload order, which is the queue's) were all graded."""
    out, latest = [], 0.0
    for r in rows:
        if r["done_at_s"] is None:
            break
        latest = max(latest, r["done_at_s"])
        out.append(round(latest, 1))
    return out


def one_pass(paths: list[Path], workers: int, deadline: float, args) -> dict:
    folder = Path(tempfile.mkdtemp(prefix=f"serve-{workers}-"))
    db = f"sqlite:///{folder / 'service.db'}"
    sessions = connect(db)  # what `convbench teams add` does, without a process (and an import of torch) per team
    tokens = {i: store.add_team(sessions, f"team{i:02d}") for i, _ in enumerate(paths)}
    serve = ServeProcess(db, folder, ["--device", args.device, "--workers", str(workers), "--sizes", args.sizes,
                                      "--shapes", str(args.shapes), "--repeats", str(args.repeats), "--rate-limit",
                                      "0", "--max-upload-kib", "4096"]
                         + (["--course-weights", str(args.course_weights.resolve())] if args.course_weights else []))
    url = serve.url
    done: dict[int, dict] = {}
    start = time.time()
    board, cut = {}, ""
    partial = args.out / f"service-{workers}.json"

    def write(wall: float) -> dict:
        rows = _rows(paths, done)
        per_gpu = collections.Counter(r["gpu_index"] for r in rows if r["state"] == "done")
        result = {"workers": workers, "submitted": len(paths), "graded": len(done), "wall_s": wall,
                  "per_minute": 60 * len(done) / wall if wall else None, "jobs_per_gpu": dict(per_gpu),
                  "prefix_done_s": prefix_times(rows), "cut": cut, "rows": rows, "leaderboard": board,
                  "log_tail": serve.tail()}
        partial.write_text(json.dumps(result, indent=1))
        return result

    try:
        serve.start(timeout=300)
        start = time.time()
        ids = {}
        for i, path in enumerate(paths):
            data, name = archive.pack(path, 4 << 20)
            reply = httpx.post(f"{url}/api/submissions", files={"file": (f"{name}.tar.gz", data)},
                               headers={"Authorization": f"Bearer {tokens[i]}"}, timeout=60)
            reply.raise_for_status()
            ids[i] = reply.json()["id"]
        with httpx.Client(timeout=10) as client:
            while len(done) < len(ids) and time.time() - start < deadline:
                latencies = _poll(client, url, ids, tokens, done, start)
                load = os.getloadavg()[0]
                print(f"  {workers} worker(s): {len(done)}/{len(ids)} graded at {time.time() - start:.0f} s "
                      f"(slowest answer {max(latencies, default=0):.2f} s, load {load:.1f})", flush=True)
                write(time.time() - start)
                time.sleep(1)
        board = httpx.get(f"{url}/api/leaderboard", timeout=30).json()
    except BaseException as e:  # a cut run (timeout's SIGTERM, an error) still writes what it saw
        cut = f"{type(e).__name__}: {e}"
        raise
    finally:
        wall = time.time() - start
        try:
            serve.stop()
        finally:
            result = write(wall)
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("paths", nargs="+", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--workers", default="2,1", help="passes: worker counts, in order (default 2,1)")
    p.add_argument("--sizes", default="100,1000,10000")
    p.add_argument("--shapes", type=int, default=3)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--course-weights", type=Path)
    p.add_argument("--deadline", default="480", help="stop waiting for a pass after this many s: one number, or one "
                   "per pass (e.g. 200,330)")
    p.add_argument("--no-prebuild", action="store_true")
    p.add_argument("--device", default="cuda", help="cuda (default); cpu tries the script on a machine without one")
    args = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("serve_on_gpus: terminated"))  # the passes' finally blocks run
    args.out.mkdir(parents=True, exist_ok=True)
    summary = []
    if not args.no_prebuild:
        start = time.time()
        prebuild(args.paths, 16)
        summary.append(f"prebuild of {len(args.paths)} submissions: {time.time() - start:.0f} s")
        print(summary[-1], flush=True)
    passes = [int(w) for w in args.workers.split(",")]
    deadlines = [float(d) for d in args.deadline.split(",")]
    deadlines += deadlines[-1:] * (len(passes) - len(deadlines))
    for workers, deadline in zip(passes, deadlines):
        result = one_pass(args.paths, workers, deadline, args)
        (args.out / f"service-{workers}.json").write_text(json.dumps(result, indent=1))
        verdicts = collections.Counter(r["verdict"] for r in result["rows"])
        summary.append(f"{workers} GPU worker(s): {result['graded']}/{result['submitted']} graded in "
                       f"{result['wall_s']:.0f} s ({result['per_minute']:.2f} per minute); jobs per GPU "
                       f"{result['jobs_per_gpu']}; verdicts {dict(verdicts)}; the first N graded by (s): "
                       f"{result['prefix_done_s']}")
        print(summary[-1], flush=True)
        (args.out / "service-summary.txt").write_text("\n".join(summary) + "\n")  # after each pass: a cut run keeps it
    (args.out / "service-summary.txt").write_text("\n".join(summary) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
