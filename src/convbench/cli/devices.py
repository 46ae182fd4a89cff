"""Choosing the device and the implementation from --device / --impl, with one-line errors when they don't fit."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from convbench.core.contract import ConvImpl
from convbench.core.errors import UsageError
from convbench.impls.registry import DEFAULT_IMPL, all_impls
from convbench.user import BuildOptions, Wording, check_unique, use_build_options
from convbench.user import resolve as resolve_impl

MACRO = re.compile(r"^[A-Za-z_]\w*(=[^\n]*)?$")


def apply_build_options(args) -> None:
    """-D NAME=VALUE and --header FILE (cli/main.add_build_options), checked, for the submissions loaded next."""
    defines = tuple(getattr(args, "defines", None) or ())
    for d in defines:
        if not MACRO.match(d):
            raise UsageError(f"-D {d!r} is not a macro definition; write -D NAME or -D NAME=VALUE")
    header = getattr(args, "header", None)
    if header is not None:
        path = Path(header).expanduser()
        if not path.is_file():
            raise UsageError(f"--header {header}: no such file; give the path of a gpu-new-forward.h")
        header = str(path.resolve())
    use_build_options(BuildOptions(defines, header))


def _no_gpu() -> str:
    """Why PyTorch sees no GPU, for an error line."""
    build = "a CPU-only build" if torch.version.cuda is None else f"CUDA {torch.version.cuda}, but no GPU is visible"
    return f"no CUDA GPU available to PyTorch ({torch.__version__}, {build})"


def require_cuda(asked: str = "--device cuda", fix: str = "or use --device cpu") -> None:
    """A one-line error naming what asked for the GPU (the option the user gave) where PyTorch sees none."""
    if not torch.cuda.is_available():
        raise UsageError(f"{asked}: {_no_gpu()}; run on a GPU machine with a CUDA build of torch, {fix}")


def _cpu_choice(precision: str) -> str:
    """The flags of an implementation that runs on the CPU: the CPU's default, in fp32 where none computes in the
    precision asked for."""
    choice = f"--impl {DEFAULT_IMPL['cpu']}"
    if not any(i.runs_on("cpu") and i.precision == precision for i in all_impls()):
        choice += f" --precision fp32 (no CPU implementation computes in {precision})"
    return choice


def require_gpu_here(impl: ConvImpl, precision: str = "fp32", what: str = "implementation") -> None:
    """A GPU-only implementation where PyTorch sees no GPU: say that it needs one and name what runs here. Not
    `--device cpu` (it does not run on the CPU, and that error would send the user back to --device cuda)."""
    if impl.device == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"{what} {impl.name} needs a CUDA GPU: {_no_gpu()}; run it on a GPU machine, or here pick "
                         f"a CPU implementation: {_cpu_choice(precision)} or another that `convbench impls` marks "
                         "as running here")


class CommandLine(Wording):
    """user.resolve's errors for the command line: its options, and a GPU PyTorch does not see named as the option
    that asked for it."""

    def gpu_needed_by(self, impl: ConvImpl, precision: str, what: str) -> None:
        require_gpu_here(impl, precision, what)

    def gpu_asked_for(self) -> None:
        require_cuda()  # --device cpu runs the CPU's default here


COMMAND_LINE = CommandLine()


def resolve(impl_name: str | None, device: str | None, precision: str = "fp32") -> tuple[ConvImpl, str]:
    """--impl, --device and --precision together (user.resolve): each of --impl and --device defaults from the
    other, they must agree, and --precision picks the implementation's variant."""
    return resolve_impl(impl_name, device, precision, COMMAND_LINE)


def all_on(device: str, precision: str = "fp32") -> list[ConvImpl]:
    """`--impl all`: every implementation that runs on the device; with a reduced --precision, those of it."""
    impls = [i for i in all_impls() if i.runs_on(device) and (precision == "fp32" or i.precision == precision)]
    if not impls:
        other = "cuda" if device == "cpu" else "cpu"
        raise UsageError(f"no {precision} implementation runs on {device}; use --device {other} or --precision fp32")
    return impls


def resolve_many(text: str, device: str | None, what: str, precision: str = "fp32") -> tuple[list[ConvImpl], str | None]:
    """`--impl a,b,c`: each resolved (one device for all), the same implementation once, and no two different files
    under one name (user.check_unique)."""
    impls: list[ConvImpl] = []
    for name in text.split(","):
        if not name.strip():
            raise UsageError(f"{what} {text!r} has an empty name; separate names with single commas")
        impl, device = resolve(name.strip(), device, precision)
        if not any(i is impl for i in impls):
            impls.append(impl)
    check_unique(impls)
    return impls, device
