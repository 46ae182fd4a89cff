"""What an implementation declares besides its code: its name (one per precision variant), device, texts,
precision, arithmetic and place on a ladder, and the order in which implementations are listed.

No torch here: `@conv_impl` (core/contract.py) builds each ConvImpl from these, and `convbench impls` lists the
same ones from the declarations in the implementation files without importing them (impls/catalog.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from convbench.core.precision import ARITHMETICS
from convbench.core.precision import arithmetic as arithmetic_of

DEVICES = ("cpu", "cuda")
LADDER_MODULE = re.compile(r"^(cpu|gpu|triton)_(\d\d)_([a-z0-9_]+)$")  # gpu_08_per_layer: ("gpu", "08", "per_layer")
LADDER_ORDER = {"": 0, "cpu": 1, "gpu": 2, "triton": 3}
DEVICE_ORDER = {"any": 0, "cpu": 1, "cuda": 2}


@dataclass(frozen=True)
class ImplInfo:
    name: str
    device: str  # "cpu", "cuda" or "any" (the reference)
    summary: str
    demonstrates: str
    precision: str
    tolerance: float
    arithmetic: str
    family: str  # the variant family's name; "" for a lone impl
    module: str
    ladder: str  # "cpu", "gpu", "triton" for a rung; "" for the libraries and the reference
    rung: int
    fused: bool  # has a fused conv + activation + pool op


def place(module: str) -> tuple[str, int]:
    """(ladder, rung) from the module's file name: convbench.impls.gpu_08_per_layer -> ("gpu", 8)."""
    m = LADDER_MODULE.match(module.rsplit(".", 1)[-1])
    return (m.group(1), int(m.group(2))) if m else ("", 0)


def declare(name: str, module: str, *, device: str, summary: str, demonstrates: str, precision: str | None = None,
            tolerance: float | None = None, arithmetic: str = "fp32", variants: dict[str, str] | None = None,
            summaries: dict[str, str] | None = None, fused: bool = False) -> list[ImplInfo]:
    """The implementations one `@conv_impl(...)` in `module` declares (its arguments of the same names): `name`, or
    with `variants` (name suffix -> arithmetic) `name` for the suffix "" and `name-SUFFIX` for the others. Precision
    and tolerance default to the arithmetic's; a variant's summary is `summaries[suffix]`, else generated."""
    if device not in (*DEVICES, "any"):
        raise ValueError(f"implementation {name}: device={device!r}; use one of cpu, cuda, any")
    members = variants or {"": arithmetic}
    for a in members.values():
        if a not in ARITHMETICS:
            raise ValueError(f"implementation {name}: arithmetic {a!r}; use one of {', '.join(ARITHMETICS)}")
    ladder, rung = place(module)
    infos = []
    for suffix, arith in members.items():
        a = arithmetic_of(arith)
        text = summary if not variants else (summaries or {}).get(suffix) or (
            summary if not suffix else f"{name} with {a.describe}")
        infos.append(ImplInfo(f"{name}-{suffix}" if suffix else name, device, text, demonstrates,
                              precision or a.precision, tolerance if tolerance is not None else a.tolerance, arith,
                              name if variants else "", module, ladder, rung, fused))
    return infos


def listing_key(impl) -> tuple:
    """The order implementations are listed in: the reference first, then per device the library, then the ladders
    in order (a family's variants after its fp32 member)."""
    return (DEVICE_ORDER.get(impl.device, 3), LADDER_ORDER.get(impl.ladder, 4), impl.rung, impl.family or impl.name,
            impl.family != "" and impl.name != impl.family, impl.name)
