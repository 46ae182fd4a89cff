"""The `convbench` command: argument parsing and dispatch. Each sub-command lives in its own module.

Bad input never shows a traceback: it raises UsageError, which becomes one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from convbench import __version__
from convbench.errors import UsageError
from convbench.network.spec import MAX_IMAGE_SIZE

MAX_IMAGES = 10000
COMMANDS = {"run": "run", "verify": "verify", "train": "train", "impls": "info", "nets": "info", "data": "info",
            "sweep": "sweep"}


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


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="convbench", description="Write, verify, race and profile convolution kernels inside real CNN "
                "inference on Fashion-MNIST (the ECE408 course project).")
    p.add_argument("--version", action="version", version=f"convbench {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    run = sub.add_parser("run", help="inference with a chosen convolution implementation: Op Time and Correctness")
    run.add_argument("--net", help="course network (default minidnn; with --weights PATH: the file's own)")
    run.add_argument("--weights", default="own", help="own | high | low | PATH (.safetensors, MXNet .params, mini-dnn .bin)")
    run.add_argument("--impl", help="convolution implementation (default: cpu-parallel on cpu, cudnn on cuda)")
    run.add_argument("--size", type=image_count, default=1000, help="number of test images, 1-10000 (default 1000)")
    run.add_argument("--device", choices=("cpu", "cuda"), help="where the convolutions run (default: the impl's)")
    run.add_argument("--image-size", type=image_size, help="input size for imported networks (default: from the weights)")
    run.add_argument("--data-dir", help="folder with the Fashion-MNIST ubyte files (default: $CONVBENCH_DATA, the Debian package, the bundled copy)")
    run.add_argument("--json", action="store_true", help="print one JSON document instead of the course's lines")

    sub.add_parser("impls", help="list the convolution implementations")
    nets = sub.add_parser("nets", help="the course networks, per layer: shapes, FLOPs, bytes")
    nets.add_argument("--net", help="only this network")

    verify = sub.add_parser("verify", help="check implementations against the float64 reference on random shapes")
    verify.add_argument("--impl", default="all", help="an implementation, several (a,b,c), or all (default) that run on --device")
    verify.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: cpu, or the impl's device")
    verify.add_argument("--shapes", type=positive_int, default=50, help="how many shapes (default 50: edge cases, then random)")
    verify.add_argument("--seed", type=seed_value, help="random seed (default: a fresh one, printed)")

    sweep = sub.add_parser("sweep", help="GPU: time an implementation's launch parameters per layer, record the best")
    sweep.add_argument("--impl", required=True, help="an implementation with tunables (see `convbench impls`)")
    sweep.add_argument("--net", default="fa19", help="network whose conv layers to tune (default fa19)")
    sweep.add_argument("--batch", type=image_count, default=10000, help="images per timed call (default 10000)")
    sweep.add_argument("--reps", type=positive_int, default=20, help="timed runs per candidate; the median counts")

    train = sub.add_parser("train", help="train our own weights for a network (PyTorch, CPU, seeded)")
    train.add_argument("net", help="course network to train")
    train.add_argument("--variant", choices=("high", "low"), help="fa17 only: the long (high) or brief (low) training")
    train.add_argument("--epochs", type=positive_int, help="override the recipe's epochs")
    train.add_argument("--seed", type=seed_value, default=0)
    train.add_argument("--out", help="output .safetensors file or folder (default: ./NET[-VARIANT].safetensors)")
    train.add_argument("--data-dir", help="folder with the Fashion-MNIST train files")

    data = sub.add_parser("data", help="where the data comes from; build the resized caches")
    data.add_argument("--data-dir")
    data.add_argument("--build", action="store_true", help="build the resized test sets of every network now")
    data.add_argument("--train", action="store_true", help="with --build: the train sets too (for `train`)")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 0
        module = importlib.import_module(f"convbench.cli.{COMMANDS[args.command]}")
        return getattr(module, "cmd_" + args.command)(args) or 0
    except UsageError as e:
        print(f"convbench: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("convbench: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        message = cuda_error(e)
        if message is None:
            raise  # a bug in convbench: the traceback is for us
        print(f"convbench: error: {message}", file=sys.stderr)
        return 2


def cuda_error(e: Exception) -> str | None:
    """One line for an error raised by the GPU (a kernel fault, an out-of-memory), None for anything else."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    module = type(e).__module__ or ""
    if module.startswith("cupy") or type(e).__name__ in ("AcceleratorError", "OutOfMemoryError") or "CUDA error" in text:
        return (f"the GPU reported: {text}; run the implementation under compute-sanitizer "
                "(scripts/sanitize.sh) to find the faulting access, or use a smaller --size for out-of-memory")
    return None
