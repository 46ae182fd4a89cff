"""Where a timed call's round trip goes on this machine: two plain processes (no sandbox) exchange "go" / "done" over
a SEQPACKET socket pair, as worker.py and child.py do, with the child doing one step of a timed call in between.
Each (waiting mode, step) pair is timed CALLS times by the parent; quantiles in microseconds.

    python3 scripts/roundtrip_probe.py [--calls 80] [--images 100] [--json FILE]

Waiting modes: both sides sleep in recv / select ("block"), or poll without sleeping ("spin"), polling with
sched_yield ("spin-yield"), or the parent spins and the child blocks; "1cpu-" modes pin both processes to one CPU
(where the scheduler's wake-up placement can put them). Steps: nothing; torch.cuda.synchronize; torch.empty of the output; CUDA events around
nothing (core/timing.timed); a CUDA generator made and seeded; protocol.perturb of x; perturb + timed(empty) +
synchronize (what a calibration call does).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

STEPS = ("nothing", "sync", "empty", "events", "generator", "perturb", "call")
# mode: (parent spins, child spins, sched_yield while spinning, both on one CPU)
MODES = {"block": (False, False, False, False), "spin": (True, True, False, False),
         "spin-yield": (True, True, True, False), "parent-spin": (True, False, False, False),
         "1cpu-block": (False, False, False, True), "1cpu-spin": (True, True, False, True),
         "1cpu-spin-yield": (True, True, True, True)}


def child(fd: int, spin: str, images: int, device: str) -> None:
    import torch

    from convbench.core.timing import synchronize, timed
    from convbench.user.protocol import perturb

    sock = socket.socket(fileno=fd)
    x = torch.rand(images, 1, 86, 86, device=device)
    shape = (images, 4, 80, 80)
    perturb(torch.ones(8, device=device), 0)
    torch.empty(shape, device=device)
    timed(device, lambda: None)
    synchronize(device)
    sock.send(b"ready")
    while True:
        if spin != "block":
            while True:
                try:
                    data = sock.recv(64, socket.MSG_DONTWAIT)
                    break
                except BlockingIOError:
                    if spin == "yield":
                        os.sched_yield()
        else:
            data = sock.recv(64)
        if not data or data == b"quit":
            return
        step, seed = data.decode().split()
        if step == "sync":
            synchronize(device)
        elif step == "empty":
            torch.empty(shape, device=device)
            synchronize(device)
        elif step == "events":
            timed(device, lambda: None)
        elif step == "generator":
            torch.Generator(device=device).manual_seed(int(seed))
            synchronize(device)
        elif step == "perturb":
            perturb(x, int(seed))
            synchronize(device)
        elif step == "call":
            perturb(x, int(seed))
            timed(device, lambda: torch.empty(shape, device=device))
            synchronize(device)
        sock.send(b"done")


def wait(sock: socket.socket, spin: bool, give_way: bool) -> bytes:
    if spin:
        while not select.select([sock], [], [], 0)[0]:
            if give_way:
                os.sched_yield()
    return sock.recv(64)


def quantiles(values: list[float]) -> dict:
    s = sorted(values)
    pick = lambda q: s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]  # noqa: E731
    return {"min": s[0], "p10": pick(0.1), "median": statistics.median(s), "p90": pick(0.9), "max": s[-1]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=80)
    parser.add_argument("--images", type=int, default=100)
    parser.add_argument("--json")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(int(args.child[0]), args.child[1], args.images, args.device)
        return 0
    machine = {"cpus": os.cpu_count()}
    source = Path("/sys/devices/system/clocksource/clocksource0/current_clocksource")
    machine["clocksource"] = source.read_text().strip() if source.exists() else None
    rows = {}
    everywhere = os.sched_getaffinity(0)
    for mode, (parent_spin, child_spin, give_way, one_cpu) in MODES.items():
        os.sched_setaffinity(0, {min(everywhere)} if one_cpu else everywhere)  # the child inherits it
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        proc = subprocess.Popen([sys.executable, __file__, "--images", str(args.images), "--device", args.device, "--child",
                                 str(theirs.fileno()), ("yield" if give_way else "spin") if child_spin else "block"], pass_fds=(theirs.fileno(),))
        theirs.close()
        assert ours.recv(64) == b"ready"
        for step in STEPS:
            windows = []
            for i in range(args.calls + 3):
                started = time.perf_counter()
                ours.send(f"{step} {i}".encode())
                assert wait(ours, parent_spin, give_way) == b"done"
                if i >= 3:
                    windows.append(time.perf_counter() - started)
            rows[f"{mode} {step}"] = quantiles(windows)
            q = rows[f"{mode} {step}"]
            print(f"{mode:12s} {step:10s} µs: min {q['min'] * 1e6:7.1f}  p10 {q['p10'] * 1e6:7.1f}  median "
                  f"{q['median'] * 1e6:7.1f}  p90 {q['p90'] * 1e6:7.1f}  max {q['max'] * 1e6:8.1f}", flush=True)
        ours.send(b"quit")
        proc.wait(timeout=60)
    os.sched_setaffinity(0, everywhere)
    print(machine)
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine, "images": args.images, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
