"""compute-sanitizer target: sanitize_cases.py's plans with ROT 1 and AHEAD 2 compiled in."""
import runpy
from pathlib import Path

from convbench.core import gpu
from convbench.impls import gpu_15_wgmma as w


def kernel(NN, TPW, NWG, prec, skip):
    return gpu.kernel(w.SOURCE, "wgmma_conv_kernel", NN=NN, TPW=TPW, NWG=NWG, PREC=prec, SKIP=int(skip), ROT=1, AHEAD=2)


w._kernel = kernel
runpy.run_path(str(Path(__file__).with_name("sanitize_cases.py")))
