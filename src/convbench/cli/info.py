"""`convbench impls`, `convbench nets`, `convbench data`: what is there, and where the data comes from."""

from __future__ import annotations

import importlib.machinery
import os
import shutil
import tempfile
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from convbench.core.errors import UsageError
from convbench.core.spec import NETWORKS, get_network
from convbench.core.tables import NAME, TEXT, FitTable
from convbench.data import fashion_mnist as fm
from convbench.impls import catalog

out = Console(highlight=False, soft_wrap=True)
HERE_MARK, NOT_HERE_MARK = "yes", "-"  # `convbench impls`: runs on this machine, or not


def _wide() -> Console:
    return Console(highlight=False)


def rung_label(impl) -> str:
    """Where an implementation stands: "gpu 14" (rung 14 of the CUDA C ladder), "cuda lib", "reference"."""
    if impl.ladder:
        return f"{impl.ladder} {impl.rung}"
    return "reference" if impl.device == "any" else f"{impl.device} lib"


def cuda_gpu_seen() -> bool:
    """Whether this machine shows an NVIDIA GPU, told without torch (seconds to import, which `convbench impls` must
    not wait for): the driver's control node or nvidia-smi, unless CUDA_VISIBLE_DEVICES hides every GPU."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", "unset").strip() in ("", "-1"):
        return False
    return os.path.exists("/dev/nvidiactl") or shutil.which("nvidia-smi") is not None


def runs_here(impl, cuda_seen: bool) -> bool:
    """The reference ("any") and the CPU implementations run anywhere; the CUDA ones where a GPU is seen."""
    return impl.device != "cuda" or cuda_seen


def _precision(impl) -> str:
    return impl.precision if impl.arithmetic == impl.precision else f"{impl.precision}:{impl.arithmetic}"


def _impls_table(verbose: bool, cuda_seen: bool) -> Table:
    """One row per implementation: its summary on one line, shortened to fit; with verbose, what it demonstrates,
    wrapped."""
    title = "convolution implementations, ladder by ladder (the contract: core/contract.py)"
    # expand: the text column takes what the others leave, however long its longest word (which would otherwise
    # hold it wide and make rich narrow every column, names too)
    table = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0), expand=True)
    for col in ("rung", "name", "device", "precision", "here"):
        table.add_column(col, no_wrap=True)
    table.add_column("what it demonstrates" if verbose else "summary", ratio=1)
    for impl in catalog.declared():  # read from the files, not imported: no torch
        # a Text's own no_wrap keeps the row one line, while the column stays the one rich narrows to fit
        text = impl.demonstrates if verbose else Text(impl.summary, no_wrap=True, overflow="ellipsis")
        table.add_row(rung_label(impl), impl.name + ("*" if impl.fused else ""), impl.device, _precision(impl),
                      HERE_MARK if runs_here(impl, cuda_seen) else NOT_HERE_MARK, text)
    return table


def c_launcher_built() -> bool:
    """Whether the C launcher (core/gpu/_launch.c) was built at install, told without importing torch: its extension
    module lies beside the launcher."""
    folder = Path(__file__).resolve().parents[1] / "core" / "gpu"
    return any(p.name.startswith("_launch.") for suffix in importlib.machinery.EXTENSION_SUFFIXES
               for p in folder.glob(f"_launch*{suffix}"))


def _here_legend(cuda_seen: bool) -> str:
    if cuda_seen:
        return f"here: {HERE_MARK} runs on this machine (a CUDA GPU is seen)"
    return f"here: {HERE_MARK} runs on this machine; {NOT_HERE_MARK} needs a CUDA GPU, and none is seen here"


def cmd_impls(args) -> int:
    cuda_seen = cuda_gpu_seen()
    console = _wide()
    console.print(_impls_table(args.verbose, cuda_seen))
    console.print(_here_legend(cuda_seen))
    console.print("* has a fused conv + activation + pool op; precision:arithmetic where the FLOPs run on another "
                  "arithmetic (3xTF32 is fp32-accurate)")
    console.print(("" if args.verbose else "-v: what each demonstrates. ") + "Each rung's file says what it changes, "
                  "why that is faster and what bounds it: src/convbench/impls/<ladder>_<NN>_<name>.py (+ .cu)")
    if cuda_seen and not c_launcher_built():
        console.print("note: the C launcher (convbench.core.gpu._launch) was not built, so the CUDA C rungs launch "
                      "through ctypes, a few microseconds slower a call; reinstall convbench where a C compiler and "
                      "Python's headers are")
    return 0


def _fmt_shape(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


def cmd_nets(args) -> int:
    specs = [get_network(args.net)] if args.net else list(NETWORKS.values())
    console = _wide()
    for spec in specs:
        table = FitTable(title=f"{spec.name}: {spec.description}  (per image; conv layers go through --impl)")
        table.add_column("layer", NAME)
        table.add_column("input")
        table.add_column("output")
        table.add_column("parameters", TEXT)
        table.add_column("FLOPs")
        table.add_column("bytes (fp32)")
        for info in spec.layer_info:
            params = ", ".join(f"{n.split('.')[1]} {_fmt_shape(s)}" for n, s in info.params.items())
            name = Text(info.name, style="bold" if info.name.startswith("conv") else "")
            table.add_row(name, _fmt_shape(info.in_shape), _fmt_shape(info.out_shape), params, f"{info.flops:,}",
                          f"{info.bytes:,}")
        conv_flops = sum(i.flops for i in spec.conv_layers)
        total = sum(i.flops for i in spec.layer_info)
        table.add_row("total", "", "", "", f"{total:,}", f"{sum(i.bytes for i in spec.layer_info):,}", end_section=True)
        table.caption = f"convolutions: {conv_flops / total:.1%} of the FLOPs; at 10000 images {conv_flops * 1e4 / 1e9:.1f} GFLOP"
        console.print(table)
    return 0


def cmd_data(args) -> int:
    for split in fm.SPLITS:
        try:
            src = fm.locate(split, args.data_dir)
            out.print(f"{split:5}  {src.images}  ({src.origin})")
        except UsageError as e:
            if args.data_dir is not None or split == "t10k":
                raise
            out.print(f"{split:5}  not found: {e}")
    out.print(f"cache  {fm.cache_dir()}")
    if args.build:
        try:  # before minutes of resizing: a cache folder that cannot take a file is the error, not the end
            fm.cache_dir().mkdir(mode=0o700, parents=True, exist_ok=True)  # private, as core/cachefile.py makes it
            tempfile.TemporaryFile(dir=fm.cache_dir()).close()
        except OSError as e:
            raise UsageError(f"cannot write to the cache folder {fm.cache_dir()} ({e.strerror or e}); set "
                             "$CONVBENCH_CACHE to a writable folder") from None
        sizes = sorted({spec.input_size for spec in NETWORKS.values()} - {fm.NATIVE_SIZE})
        for split in ("t10k", "train") if args.train else ("t10k",):
            images, _, src = fm.load_split(split, args.data_dir)
            for size in sizes:
                fm.resized(images, size, src, split, must_cache=True)  # nothing cached is a failure here
        out.print(f"built: {', '.join(f'{s}px' for s in sizes)}")
    return 0
