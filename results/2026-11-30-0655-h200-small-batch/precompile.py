"""Compile the stamped variants' cubins for the shipped plans of NETS at SIZES, in parallel processes, into NVRTC's
disk cache (stamp_run.py then loads them). python3 precompile.py NETS SIZES FILE[:JOIN] ..."""
import multiprocessing
import pathlib
import sys

HERE = pathlib.Path(__file__).parent
LAYERS = {"fa19": (12, 24, 33, 5), "sp19": (6, 16, 22, 5), "minidnn": (4, 16, 40, 7), "fa18": (12, 24, 33, 7)}


def compile_one(job):
    from convbench.core import gpu
    file, defines = job
    gpu.kernel(HERE / file, "wgmma_conv_kernel", **dict(defines))


def main():
    from convbench.core.precision import kernel_code
    from convbench.impls import gpu_15_wgmma as wgmma
    fp16x3 = kernel_code("fp16x3")
    jobs = set()
    for B in [int(b) for b in sys.argv[2].split(",")]:
        for net in sys.argv[1].split(","):
            C, M, H, K = LAYERS[net]
            p = wgmma.plan(B, C, H, H, M, K, fp16x3, 132)
            for spec in sys.argv[3:]:
                file, _, join = spec.partition(":")
                d = {"NN": p.NN, "TPW": p.TPW, "NWG": p.NWG, "PREC": fp16x3, "SKIP": 1}
                if join:
                    d["JOIN_FIRST"] = int(join)
                jobs.add((file, tuple(sorted(d.items()))))
    with multiprocessing.get_context("spawn").Pool(min(len(jobs), 14)) as pool:
        list(pool.imap_unordered(compile_one, sorted(jobs)))
    print(f"{len(jobs)} stamped kernels compiled", flush=True)


if __name__ == "__main__":
    main()
