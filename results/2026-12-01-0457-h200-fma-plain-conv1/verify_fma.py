"""`convbench verify` of gpu-igemm-tc and gpu-wgmma with the FMA kernel forced onto every single-channel layer it can
run (igemm.C1_FMA = True): the random shapes of verify reach it only where a recorded plan names their exact shape,
so this is the kernel's verify on 60 shapes (batch 1-128, non-tile sizes, poisoned outputs, the wide-range case).
usage: verify_fma.py IMPL [verify options]"""
import sys

from convbench.cli.main import main
from convbench.impls import gpu_14_igemm_tc as igemm

igemm.C1_FMA = True
sys.exit(main(["verify", "--impl", sys.argv[1], *sys.argv[2:]]))
