"""The `convbench` command: argument parsing and dispatch. Each sub-command lives in its own module.

Bad input never shows a traceback: it raises UsageError, which becomes one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import signal
import sys
import threading

from convbench.core import __version__, outputs
from convbench.core.errors import UsageError, cuda_error
from convbench.core.spec import MAX_IMAGE_SIZE
from convbench.cli.service_args import add_parsers as add_service_parsers

MAX_IMAGES = 10000
from convbench.core.precision import PRECISIONS  # noqa: E402  (the table imports no torch)

COMMANDS = {"run": "run", "verify": "verify", "train": "train", "impls": "info", "nets": "info", "data": "info",
            "sweep": "sweep", "bench": "bench", "ceilings": "bench", "profile": "profile", "report": "report",
            "leaderboard": "leaderboard", "grade": "grade", "serve": "service", "submit": "submit",
            "worker": "service", "teams": "teams"}


GRADERS = {"grade", "serve", "worker"}  # commands that time a submission's calls from their own process
OMP_SET_BY_GRADER = "CONVBENCH_GRADER_SET_OMP_WAIT_POLICY"


def quiet_openmp() -> None:
    """In a grader, OpenMP threads sleep as soon as their work is done (OMP_WAIT_POLICY=PASSIVE, read when torch
    loads): by default they spin for milliseconds after each parallel copy of the grader's, holding the cores in the
    window in which it times a submission's call. The submission's own process keeps the user's setting
    (sandbox.environment drops the one set here)."""
    if "OMP_WAIT_POLICY" in os.environ or "torch" in sys.modules:
        return
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    os.environ[OMP_SET_BY_GRADER] = "1"


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line (problem + fix) and exit 2, without the usage block."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{message}; see `{self.prog} --help`")


def whole_number(what: str, lo: int, hi: int | None = None):
    """An argparse type: an int in [lo, hi], with a one-line message naming the allowed range."""
    allowed = f"a whole number from {lo} to {hi}" if hi is not None else f"a whole number >= {lo}"

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}; use {allowed}") from None
        if n < lo or (hi is not None and n > hi):
            raise argparse.ArgumentTypeError(f"{what} {n} is out of range; use {allowed}")
        return n

    return parse


image_count = whole_number("a number of images", 1, MAX_IMAGES)
image_size = whole_number("an image size", 1, MAX_IMAGE_SIZE)
positive_int = whole_number("a count", 1)
seed_value = whole_number("a seed", 0, 2**31 - 1)


def add_build_options(parser: argparse.ArgumentParser) -> None:
    """-D and --header: how a user's CUDA submission is compiled (ignored for built-in implementations)."""
    parser.add_argument("-D", dest="defines", action="append", metavar="NAME[=VALUE]",
                        help="pass a macro to nvcc when building a user's .cu/.cuh submission (repeatable)")
    parser.add_argument("--header", metavar="FILE", help="a mini-dnn submission's gpu-new-forward.h to build against "
                        "(default: the one beside the file, else convbench's)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="convbench", description="Write, verify, race and profile convolution kernels inside real CNN "
                "inference on Fashion-MNIST (the ECE408 course project).")
    p.add_argument("--version", action="version", version=f"convbench {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    run = sub.add_parser("run", help="inference with a chosen convolution implementation: Op Time and Correctness")
    add_build_options(run)
    run.add_argument("--net", help="course network (default minidnn; with --weights PATH: the file's own)")
    run.add_argument("--weights", default="own", help="own | high | low | PATH (.safetensors, MXNet .params, mini-dnn .bin)")
    run.add_argument("--impl", help="convolution implementation (default: cpu-direct on cpu, cudnn on cuda)")
    run.add_argument("--size", type=image_count, default=1000, help="number of test images, 1-10000 (default 1000)")
    run.add_argument("--device", choices=("cpu", "cuda"), help="where the convolutions run (default: the impl's)")
    run.add_argument("--image-size", type=image_size, help="input size for imported networks (default: from the weights)")
    run.add_argument("--data-dir", help="folder with the Fashion-MNIST ubyte files (default: $CONVBENCH_DATA, the Debian package, the bundled copy)")
    run.add_argument("--json", action="store_true", help="print one JSON document instead of the course's lines")
    run.add_argument("--time", action="store_true", help="also print elapsed, user, system time and max RSS (like /usr/bin/time)")
    run.add_argument("--precision", choices=PRECISIONS, default="fp32", help="the impl's variant of this precision "
                     "(default fp32); a reduced one also runs the fp32 variant and prints the Correctness delta")
    run.add_argument("--fuse", action="store_true", help="conv + activation + pool in one call of the impl's fused "
                     "op, timed as that conv's Op Time (default: each conv alone, as the course timed it)")
    run.add_argument("--whole-network", action="store_true", help="every layer on the GPU (fused conv kernels, "
                     "tensor-core dense), one CUDA graph: prints Network Time on device-resident input (no --impl)")
    run.add_argument("--baselines", action="store_true", help="with --whole-network: also time PyTorch eager and "
                     "torch.compile of the same network on the same input, in this process (cuDNN benchmark mode, "
                     "TF32 off), and print the speed-ups over them")

    impls = sub.add_parser("impls", help="list the convolution implementations, one line each")
    impls.add_argument("-v", "--verbose", action="store_true",
                       help="what each demonstrates, in full, instead of its one-line summary")
    nets = sub.add_parser("nets", help="the course networks, per layer: shapes, FLOPs, bytes")
    nets.add_argument("--net", help="only this network")

    verify = sub.add_parser("verify", help="check implementations against the float64 reference on random shapes")
    add_build_options(verify)
    verify.add_argument("--impl", default="all", help="an implementation, several (a,b,c), or all (default) that run on --device")
    verify.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: cpu, or the impl's device")
    verify.add_argument("--shapes", type=positive_int, default=50, help="how many shapes (default 50: edge cases, then random)")
    verify.add_argument("--seed", type=seed_value, help="random seed (default: a fresh one, printed)")
    verify.add_argument("--wide-shapes", type=whole_number("a count", 0), metavar="N", help="how many of the "
                        "shapes (the first) also run the wide-range inputs: magnitudes 1e-4..1e4, judged per element "
                        "against fp32's error bound sqrt(C*K*K) * 2^-24 * sum |x||k| (default 13, the edge "
                        "shapes; 0: none)")
    verify.add_argument("--precision", choices=PRECISIONS, default="fp32", help="each impl's variant of this "
                        "precision (default fp32); with all: the impls of this precision")
    verify.add_argument("--json", metavar="FILE", help="write every shape's error, the first wrong elements and the "
                        "environment here")

    sweep = sub.add_parser("sweep", help="GPU: time an implementation's launch parameters per layer, record the best")
    sweep.add_argument("--impl", required=True, help="an implementation with tunables (see `convbench impls`), or "
                       "gpu-igemm-tc / gpu-wgmma and their variants (their launch plans)")
    sweep.add_argument("--quick", action="store_true", help="launch plans: the smaller sweep, of the shapes that "
                       "won before")
    sweep.add_argument("--net", default="fa19", help="network whose conv layers to tune (default fa19)")
    sweep.add_argument("--batch", type=image_count, default=10000, help="images per timed call (default 10000)")
    sweep.add_argument("--reps", type=positive_int, default=20, help="timed runs per candidate; the median counts")

    bench = sub.add_parser("bench", help="per conv layer: median Op Time, Layer Time, GFLOP/s, GB/s, %% of the floor, vs the library")
    add_build_options(bench)
    bench.add_argument("--impls", default="all", help="implementations a,b,... or all (default) that run on --device; the library reference is always added")
    bench.add_argument("--nets", help="networks n1,n2,... or all (default: sp19 on cpu; sp19,fa19,minidnn on cuda)")
    bench.add_argument("--sizes", help="numbers of images, 1-10000 (default: 100,1000 on cpu; 100,1000,10000 on cuda)")
    bench.add_argument("--device", choices=("cpu", "cuda"), help="default: cpu, or the impls' device")
    bench.add_argument("--reps", type=positive_int, help="timed runs per layer, the median counts (default 5 on cpu, 20 on cuda)")
    bench.add_argument("--layer-reps", type=positive_int, help="timed runs for Layer Time on the GPU (default: min(reps, 3))")
    bench.add_argument("--json", metavar="FILE", help="write every number, the ceilings, verify and the environment here")
    bench.add_argument("--plot", metavar="FILE.png", help="write the Op Time vs images plot (PNG)")
    bench.add_argument("--ceilings", action="store_true", help="only show this machine's ceilings (same as `convbench ceilings`)")
    bench.add_argument("--remeasure", action="store_true", help="measure the ceilings again instead of using the cached ones")
    bench.add_argument("--precision", choices=PRECISIONS, default="fp32", help="each impl's variant of this "
                       "precision (default fp32); with all: the impls of this precision")

    ceilings = sub.add_parser("ceilings", help="this machine's copy bandwidth and GEMM rates (cached), the floor of every layer")
    ceilings.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ceilings.add_argument("--remeasure", action="store_true", help="measure again and replace the cached values")

    profile = sub.add_parser("profile", help="nvprof-style summary of one inference (torch.profiler); --ncu for hardware counters")
    add_build_options(profile)
    profile.add_argument("--impl", help="convolution implementation (default: cpu-direct on cpu, cudnn on cuda)")
    profile.add_argument("--net", default="minidnn", help="course network (default minidnn)")
    profile.add_argument("--size", type=image_count, default=100, help="number of test images, 1-10000 (default 100)")
    profile.add_argument("--device", choices=("cpu", "cuda"), help="default: the impl's")
    profile.add_argument("--ncu", action="store_true", help="also run Nsight Compute on `convbench run` and show its counters per kernel")
    profile.add_argument("--trace", metavar="FILE", help="write a Chrome trace (chrome://tracing, Perfetto)")
    profile.add_argument("--json", metavar="FILE", help="write the tables as JSON (for `convbench report --profile`)")

    grade = sub.add_parser("grade", help="grade submissions (files or folders) as the course did: verify, run at each "
                           "size, a table, CSV/JSON and a leaderboard")
    add_build_options(grade)
    grade.add_argument("paths", nargs="+", metavar="PATH", help="submissions: .cu/.cuh/.py files or folders, or a "
                       "built-in implementation's name (a ladder rung, graded as a submission)")
    grade.add_argument("--sizes", default="100,1000,10000", help="image counts to run (default 100,1000,10000)")
    grade.add_argument("--device", choices=("cpu", "cuda"), help="default: cuda")
    grade.add_argument("--net", help="run this network (default: mini-dnn files minidnn; MXNet-era files the first of "
                       "sp19, fa19, fa18, sp18, fa17 whose course layers they get right)")
    grade.add_argument("--course-weights", metavar="DIR", help="the course's model files (DIR/minidnn/weights-86.bin, "
                       "DIR/mxnet/NET-*.params); default: convbench's own weights")
    grade.add_argument("--shapes", type=positive_int, default=20, help="verify shapes (default 20: the 13 edge "
                       "shapes, then random ones)")
    grade.add_argument("--seed", type=seed_value)
    grade.add_argument("--jobs", type=positive_int, default=min(8, os.cpu_count() or 1),
                       help="nvcc builds at a time before grading (default: the CPU count, at most 8)")
    grade.add_argument("--json", metavar="FILE", help="write every grade, the environment and the leaderboard as JSON")
    grade.add_argument("--csv", metavar="FILE", help="write one row per submission as CSV")
    grade.add_argument("--feedback", action="store_true", help="after each correct grade, a TA's feedback: roofline, "
                       "what bounds each layer, the nearest rung of the ladder and the next step (bounded extra work; "
                       "the timed runs are unchanged)")
    grade.add_argument("--no-counters", action="store_true", help="feedback without Nsight Compute's counters (which "
                       "run where the driver allows every user them, about 10 s a layer)")
    grade.add_argument("--feedback-md", metavar="DIR", help="also write each submission's feedback as Markdown into "
                       "DIR (implies --feedback)")
    grade.add_argument("--allow-unsandboxed", action="store_true", help="grade even where the sandbox's self-test "
                       "fails (trusted code only: the submissions then see your files and the network)")

    report = sub.add_parser("report", help="Markdown + HTML report with plots from results files")
    report.add_argument("--out", required=True, metavar="DIR", help="folder for report.md, report.html and the PNG plots (created if absent)")
    report.add_argument("--results", nargs="+", metavar="FILE", help="`convbench bench --json` (or `run --whole-network --json`) files (default: the newest run of each card under results/)")
    report.add_argument("--profile", nargs="+", metavar="FILE", help="profile JSON files (`convbench profile --json`) to include")

    board = sub.add_parser("leaderboard", help="rank verified implementations by Σ Op Time at 10000 images, one board per card")
    board.add_argument("--results", nargs="+", metavar="FILE", help="`convbench bench --json` (or `run --whole-network --json`) files (default: the newest run of each card under results/)")
    board.add_argument("--images", type=image_count, default=MAX_IMAGES, help="batch size to rank at (default 10000, the course's)")
    board.add_argument("--net", help="rank on this network alone (default: Σ over every network measured)")

    train = sub.add_parser("train", help="train our own weights for a network (PyTorch, CPU, seeded)")
    train.add_argument("net", help="course network to train")
    train.add_argument("--variant", choices=("high", "low"), help="fa17 only: the long (high) or brief (low) training")
    train.add_argument("--epochs", type=positive_int, help="override the recipe's epochs")
    train.add_argument("--seed", type=seed_value, default=0)
    train.add_argument("--out", help="output .safetensors file or folder (default: ./NET[-VARIANT].safetensors)")
    train.add_argument("--data-dir", help="folder with the Fashion-MNIST train files")

    add_service_parsers(sub, positive_int)

    data = sub.add_parser("data", help="where the data comes from; build the resized caches")
    data.add_argument("--data-dir")
    data.add_argument("--build", action="store_true", help="build the resized test sets of every network now")
    data.add_argument("--train", action="store_true", help="with --build: the train sets too (for `train`)")
    return p


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that every `finally` (temporary files, folders) runs before exit 143."""


TERM_GRACE_S = 30.0  # after SIGTERM, the most the `finally` blocks get before the process ends regardless
_grace: list[threading.Timer] = []  # the running grace timer, if any; main() cancels it once Terminated is handled


def _on_sigterm(signum, frame):
    """Raise Terminated so that cleanup runs. Should library code swallow it (a bare `except:` that happened to be
    running), SIGTERM would be lost and the command would run on: a daemon timer ends the process after
    TERM_GRACE_S unless main() has handled the exception by then."""
    if not _grace:
        timer = threading.Timer(TERM_GRACE_S, _force_exit)
        timer.daemon = True
        timer.start()
        _grace.append(timer)
    raise Terminated()


def _force_exit() -> None:
    print("convbench: terminated", file=sys.stderr, flush=True)
    os._exit(143)


def _quiet_stdout() -> None:
    """After a broken pipe or a full disk on stdout: point it at /dev/null, so the interpreter's final flush of what
    is still buffered raises nothing more (the recipe of the Python docs, `signal`, 'Note on SIGPIPE')."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def main(argv: list[str] | None = None) -> int:
    try:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread (an embedding): leave SIGTERM as it is
        previous = None
    try:
        return _main(argv)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        while _grace:  # Terminated reached main: cleanup ran, no forced exit (main may be called again in-process)
            _grace.pop().cancel()


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 0
        if args.command in GRADERS:
            quiet_openmp()
        module = importlib.import_module(f"convbench.cli.{COMMANDS[args.command]}")
        with outputs.pooled():  # convbench's own calls: GPU outputs are reused once dropped (core/outputs.py)
            code = getattr(module, "cmd_" + args.command)(args) or 0
        sys.stdout.flush()  # here, so that a closed pipe or a full disk is reported below, not at exit
        return code
    except UsageError as e:
        print(f"convbench: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("convbench: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print("convbench: terminated", file=sys.stderr)
        return 143
    except BrokenPipeError:  # `convbench run | head -1`: the reader is gone; nothing to say
        _quiet_stdout()
        return 141
    except SystemExit as e:
        if isinstance(e.__context__, BrokenPipeError):  # rich's own handler (Console.on_broken_pipe): the same case
            _quiet_stdout()
            return 141
        raise
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO):
            raise  # a bug in convbench: the traceback is for us
        _quiet_stdout()
        print(f"convbench: error: cannot write the output ({e.strerror}); free some space or write it elsewhere",
              file=sys.stderr)
        return 1
    except Exception as e:
        message = cuda_error(e)
        if message is None:
            raise  # a bug in convbench: the traceback is for us
        print(f"convbench: error: {message}", file=sys.stderr)
        return 2
