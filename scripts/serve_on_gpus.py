"""The grading service on a GPU machine, as staff would run it: `convbench serve` with one Dask worker per GPU
grades a set of real submissions, each from its own team, and the same set again with fewer workers, for the
throughput of one GPU against several in one run.

    python3 scripts/serve_on_gpus.py --out DIR --workers 2,1 --course-weights DIR SUBMISSION...

Before the passes every CUDA submission is built once (measure.grade.prebuild, into the shared $CONVBENCH_CACHE), so
no pass pays for nvcc and the passes compare grading alone. Each pass: a fresh SQLite database, `convbench serve
--workers W`, `convbench teams add` per submission, every upload at once through the API, then the wait until every
one is graded (or --deadline seconds). Written to DIR: service-W.json per pass (every submission's state, verdict,
worker, GPU index, Σ Op Time; the leaderboard; per-GPU job counts; the wall time) and service-summary.txt.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from convbench.measure.grade import prebuild
from convbench.service import archive
from convbench.service.process import ServeProcess

CONVBENCH = [sys.executable, "-m", "convbench"]


def one_pass(paths: list[Path], workers: int, deadline: float, args) -> dict:
    folder = Path(tempfile.mkdtemp(prefix=f"serve-{workers}-"))
    db = f"sqlite:///{folder / 'service.db'}"
    tokens = {}
    for i, _ in enumerate(paths):
        out = subprocess.run([*CONVBENCH, "teams", "add", f"team{i:02d}", "--db", db], capture_output=True,
                             text=True, check=True)
        tokens[i] = out.stdout.strip()
    serve = ServeProcess(db, folder, ["--device", args.device, "--workers", str(workers), "--sizes", args.sizes,
                                      "--shapes", str(args.shapes), "--repeats", str(args.repeats), "--rate-limit",
                                      "0", "--max-upload-kib", "4096"]
                         + (["--course-weights", args.course_weights] if args.course_weights else []))
    url = serve.url
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
        done: dict[int, dict] = {}
        while len(done) < len(ids) and time.time() - start < deadline:
            for i, sub_id in ids.items():
                if i not in done:
                    body = httpx.get(f"{url}/api/submissions/{sub_id}", timeout=30,
                                     headers={"Authorization": f"Bearer {tokens[i]}"}).json()
                    if body["state"] in ("done", "failed"):
                        done[i] = body
            time.sleep(1)
            print(f"  {workers} worker(s): {len(done)}/{len(ids)} graded at {time.time() - start:.0f} s", flush=True)
        wall = time.time() - start
        board = httpx.get(f"{url}/api/leaderboard", timeout=30).json()
    finally:
        serve.stop()
    rows = []
    for i, path in enumerate(paths):
        body = done.get(i)
        machine = ((body or {}).get("result") or {}).get("machine") or {}
        rows.append({"submission": str(path), "team": f"team{i:02d}", "state": body["state"] if body else "unfinished",
                     "verdict": body and body["verdict"], "gpu_index": machine.get("gpu_index"),
                     "gpu": machine.get("gpu"), "driver": machine.get("driver"),
                     "sm_clock_mhz": machine.get("sm_clock_mhz"), "temperature_c": machine.get("temperature_c"),
                     "op_time_s": body and body["op_time_s"], "ranked": body and body["ranked"],
                     "seconds": ((body or {}).get("result") or {}).get("seconds")})
    per_gpu = collections.Counter(r["gpu_index"] for r in rows if r["state"] == "done")
    return {"workers": workers, "submitted": len(paths), "graded": len(done), "wall_s": wall,
            "per_minute": 60 * len(done) / wall, "jobs_per_gpu": dict(per_gpu), "rows": rows, "leaderboard": board,
            "log_tail": serve.tail()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("paths", nargs="+", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--workers", default="2,1", help="passes: worker counts, in order (default 2,1)")
    p.add_argument("--sizes", default="100,1000,10000")
    p.add_argument("--shapes", type=int, default=3)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--course-weights")
    p.add_argument("--deadline", default="480", help="stop waiting for a pass after this many s: one number, or one "
                   "per pass (e.g. 200,330)")
    p.add_argument("--no-prebuild", action="store_true")
    p.add_argument("--device", default="cuda", help="cuda (default); cpu tries the script on a machine without one")
    args = p.parse_args()
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
                       f"{result['jobs_per_gpu']}; verdicts {dict(verdicts)}")
        print(summary[-1], flush=True)
        (args.out / "service-summary.txt").write_text("\n".join(summary) + "\n")  # after each pass: a cut run keeps it
    (args.out / "service-summary.txt").write_text("\n".join(summary) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
