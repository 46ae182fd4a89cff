"""The program Nsight Compute runs in a submission's sandbox (ncu_counters.py): the submission loaded as the child
loads it, one untimed call of a layer on random inputs, then one call between cudaProfilerStart and Stop, the only
one `ncu --profile-from-start off` counts.

    python -m convbench.user.ncu_target KIND PATH OPTIONS_JSON OP B C M H W K
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import torch

from convbench.user.base import BuildOptions
from convbench.user.child import _one_call
from convbench.user.loader import load_unguarded


def main(argv: list[str]) -> int:
    kind, path, options, op = argv[0], Path(argv[1]), BuildOptions(**json.loads(argv[2])), argv[3]
    B, C, M, H, W, K = (int(v) for v in argv[4:10])
    impl = load_unguarded(kind, path, options)
    impl.prepare()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(B, C, H, W, generator=g)
    k = torch.randn(M, C, K, K, generator=g) / math.sqrt(C * K * K)
    y = torch.empty(B, M, H - K + 1, W - K + 1)
    run = _one_call(impl, op, "cuda", x, k, y)
    run()  # modules loaded, buffers allocated: not counted
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    run()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
