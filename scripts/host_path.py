"""The host's cost of a rung's call in this process, in a plain child process and in the sandbox: where a graded
rung's Op Time differs from the ladder's although its kernels take the same time (the feedback's "kernels run N of
its Op Time" finding), the difference is host work, and this says where it goes.

    python3 scripts/host_path.py [--net minidnn] [--images 1000] [--layer conv1] RUNG...

For each rung and each place: the host time of a call without synchronizing (200 calls back to back: the launch
path alone), the wall time of a synchronized call (50), and cProfile's top entries by own time over 100 calls. In
the children the measurement runs inside a Python submission wrapping the rung (timed_calls.builtin_submission's way),
on the layer's real input.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path


from convbench.data.fashion_mnist import load_dataset
from convbench.measure import bench
from convbench.core.spec import get_network
from convbench.user import worker as worker_module
from convbench.user.base import BuildOptions
from convbench.user.worker import Worker

PROBE = '''"""A rung's call measured inside a submission's process (scripts/host_path.py)."""
import cProfile, io, json, pstats, time
import torch
from convbench.impls.registry import get_impl

NAME, DEVICE = "host-path-probe", "cuda"
IMPL = get_impl({rung!r})


def measure(x, k):
    for _ in range(20):
        IMPL(x, k)
    torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(200):
        IMPL(x, k)
    launch_s = (time.perf_counter() - began) / 200
    torch.cuda.synchronize()
    walls = []
    for _ in range(50):
        began = time.perf_counter()
        IMPL(x, k)
        torch.cuda.synchronize()
        walls.append(time.perf_counter() - began)
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(100):
        IMPL(x, k)
    profile.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(10)
    return {{"launch_s": launch_s, "wall_s": sorted(walls)[len(walls) // 2], "profile": text.getvalue()}}


def conv_forward(x, k):
    print("PROBE " + json.dumps(measure(x, k)), flush=True)
    return IMPL(x, k)
'''


def in_child(path: Path, inp, plain: bool) -> dict:
    usable = worker_module._sandbox_usable
    if plain:
        worker_module._sandbox_usable = lambda device: False
    worker = Worker("python", path, BuildOptions())
    worker.quiet = True
    try:
        worker.run("call", inp.x_host, inp.k.cpu(), "cuda")
        found = re.findall(r"^PROBE (.*)$", worker.captured_text(), re.M)
        return {**json.loads(found[-1]), "sandboxed": worker.sandboxed} if found else {"problem": "no PROBE line"}
    finally:
        worker.remove()
        worker_module._sandbox_usable = usable


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rungs", nargs="+")
    parser.add_argument("--net", default="minidnn")
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--layer", default="conv1")
    args = parser.parse_args()
    data = load_dataset(get_network(args.net).input_size, count=args.images, quiet=True)
    inp = next(i for i in bench.conv_inputs(args.net, data.images[:args.images], "cuda") if i.layer == args.layer)
    folder = Path(tempfile.mkdtemp(prefix="host-path-"))
    for rung in args.rungs:
        path = folder / f"{rung}.py"
        path.write_text(PROBE.format(rung=rung))
        namespace: dict = {}
        exec(compile(PROBE.format(rung=rung), str(path), "exec"), namespace)  # the same code, in this process
        places = {"this process": namespace["measure"](inp.x, inp.k),
                  "plain child": in_child(path, inp, plain=True),
                  "sandbox": in_child(path, inp, plain=False)}
        for place, r in places.items():
            if "problem" in r:
                print(f"{rung} {args.layer} {args.images} {place}: {r['problem']}")
                continue
            print(f"== {rung} {args.layer} at {args.images} images, {place}: launch path {r['launch_s'] * 1e6:.1f} µs,"
                  f" synchronized call {r['wall_s'] * 1e6:.1f} µs")
            print("\n".join(line for line in r["profile"].splitlines()[:22] if line.strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
