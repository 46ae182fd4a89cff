"""What the compiler says about a submission's kernels, as data for its feedback: the build report of the nvcc-built
kinds (mini-dnn new-forward.cu, MXNet new-forward.cuh).

Why: registers, spills and static shared memory decide a kernel's occupancy, and the SASS instruction mix shows
which of the course's optimizations a kernel really uses (tensor cores, half2 arithmetic, shared-memory tiling,
atomics, warp shuffles) whatever its source claims. Both come from the build itself, at no cost to the timed run:
ptxas prints each kernel's resources under `-Xptxas -v`, and `cuobjdump -sass` lists the machine code of the built
library. nvcc_build.build runs the tools (bounded) and keeps the report beside the library; the sandbox's build
step sends it to the parent, which checks it (protocol.check_build_report) before anything reads it.

Everything here is pure functions on text: no tools run, no torch. The report's layout:

    {"arch": "sm_90", "note": "" (or why a part is missing, e.g. no cuobjdump beside nvcc),
     "kernels": [{"name": demangled (or mangled where no cu++filt), printable ASCII, at most NAME_CHARS,
                  "registers", "shared_bytes" (static), "constant_bytes" (the user's __constant__ bank where ptxas
                  reports it: cmem[3]; CUDA 13's ptxas reports none, so 0), "stack_bytes", "spill_store_bytes",
                  "spill_load_bytes",
                  "instructions": {"total", "tensor", "fp16", "atomic", "shared_load", "shared_store",
                                   "global_load", "global_store", "constant_load", "shuffle", "barrier"}
                                  or {} where the SASS was not read (the note says why)}, ...]}

at most MAX_KERNELS kernels (those ptxas reports first).

ptxas's lines, as CUDA 12 and 13 print them (13 dropped the cmem figures):

    ptxas info    : 0 bytes gmem, 256 bytes cmem[3]              (a compilation unit's globals and __constant__s)
    ptxas info    : Compiling entry function '_Z6kernelPf' for 'sm_90'
    ptxas info    : Function properties for _Z6kernelPf
        624 bytes stack frame, 376 bytes spill stores, 516 bytes spill loads
    ptxas info    : Used 32 registers, used 1 barriers, 1024 bytes smem, 368 bytes cmem[0]

A SASS listing (`cuobjdump -sass`) names each function (`Function : _Z6kernelPf`), then one instruction a line:
`/*0040*/  @!P0 LDG.E.128 R4, desc[UR4][R2.64] ;`: the opcode is the first word after the address and the
optional predicate, its base the part before the first dot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_KERNELS = 64
NAME_CHARS = 200
NOTE_CHARS = 300
ARCH = re.compile(r"^sm_\d{2,3}[af]?$")

# SASS opcode bases by class. Tensor cores: every *MMA (HMMA, HGMMA, IMMA, IGMMA, BMMA, DMMA, QGMMA, UTC*MMA).
INSTRUCTION_CLASSES = ("total", "tensor", "fp16", "atomic", "shared_load", "shared_store", "global_load",
                       "global_store", "constant_load", "shuffle", "barrier")
_CLASS_OF = {
    **dict.fromkeys(("HADD2", "HFMA2", "HMUL2", "HSET2", "HSETP2", "HMNMX2"), "fp16"),
    **dict.fromkeys(("ATOM", "ATOMS", "ATOMG", "RED", "REDG", "REDAS"), "atomic"),
    **dict.fromkeys(("LDS", "LDSM"), "shared_load"),
    **dict.fromkeys(("STS", "STSM"), "shared_store"),
    **dict.fromkeys(("LDG", "LDGSTS", "UTMALDG"), "global_load"),
    **dict.fromkeys(("STG", "UTMASTG"), "global_store"),
    **dict.fromkeys(("LDC", "ULDC"), "constant_load"),
    "SHFL": "shuffle",
    "BAR": "barrier",
}
# ptxas materializes a constant with `HFMA2.MMA Rd, -RZ, RZ, a, b` (a move, not half arithmetic)
_CONSTANT_MOVE = re.compile(r"^HFMA2\.MMA\s+\w+\s*,\s*-RZ\s*,\s*RZ\s*,")

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_USER_CMEM = re.compile(r"(\d+) bytes cmem\[3\]")
_GMEM = re.compile(r"ptxas info\s*:\s*\d+ bytes gmem")
_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)(.*)$")


@dataclass
class PtxasKernel:
    """One entry function as ptxas reported it."""

    name: str  # mangled
    registers: int = 0
    shared_bytes: int = 0
    constant_bytes: int = 0
    stack_bytes: int = 0
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    arch: str = ""
    instructions: dict = field(default_factory=dict)


def parse_ptxas(text: str) -> list[PtxasKernel]:
    """The entry functions of nvcc's `-Xptxas -v` output, in the order ptxas compiled them. A compilation unit's
    `cmem[3]` (its __constant__ variables, where ptxas reports it) is given to each kernel of that unit; lines of
    other tools, warnings and non-entry functions are skipped."""
    kernels: list[PtxasKernel] = []
    current: PtxasKernel | None = None
    properties_of = ""
    unit_cmem = 0
    for line in text.splitlines():
        if _GMEM.search(line):
            cmem = _USER_CMEM.search(line)
            unit_cmem, current = (int(cmem.group(1)) if cmem else 0), None
        elif m := _ENTRY.search(line):
            current = PtxasKernel(m.group(1), constant_bytes=unit_cmem, arch=m.group(2))
            kernels.append(current)
        elif m := _PROPERTIES.search(line):
            properties_of = m.group(1)
        elif (m := _FRAME.search(line)) and current is not None and properties_of == current.name:
            current.stack_bytes, current.spill_store_bytes, current.spill_load_bytes = map(int, m.groups())
        elif (m := _USED.search(line)) and current is not None:
            current.registers = int(m.group(1))
            if smem := _SMEM.search(line):
                current.shared_bytes = int(smem.group(1))
            if cmem := _USER_CMEM.search(line):
                current.constant_bytes = int(cmem.group(1))
    return kernels


def instruction_class(opcode: str, operands: str = "") -> str | None:
    """The class (INSTRUCTION_CLASSES but total) of one SASS instruction, None for the others."""
    base = opcode.split(".", 1)[0]
    if base.endswith("MMA"):
        return "tensor"
    if base == "HFMA2" and _CONSTANT_MOVE.match(f"{opcode} {operands.strip()}"):
        return None
    return _CLASS_OF.get(base)


def parse_sass(text: str) -> dict[str, list[dict]]:
    """Per mangled function name (a list: the same name may come from several compilation units, in the listing's
    order), its instruction counts by class. NOPs (padding) are not counted."""
    found: dict[str, list[dict]] = {}
    counts: dict | None = None
    for line in text.splitlines():
        if m := _FUNCTION.match(line):
            counts = dict.fromkeys(INSTRUCTION_CLASSES, 0)
            found.setdefault(m.group(1), []).append(counts)
            continue
        m = _INSTRUCTION.match(line)
        if counts is None or m is None or m.group(1) == "NOP":
            continue
        counts["total"] += 1
        kind = instruction_class(m.group(1), m.group(2))
        if kind is not None:
            counts[kind] += 1
    return found


def shown_name(name: str) -> str:
    """A kernel's name as a report carries it: printable ASCII (anything else as `?`), at most NAME_CHARS."""
    clean = "".join(c if " " <= c <= "~" else "?" for c in name).strip() or "?"
    return clean if len(clean) <= NAME_CHARS else clean[:NAME_CHARS - 3] + "..."


def assemble(kernels: list[PtxasKernel], sass: dict[str, list[dict]] | None, demangled: dict[str, str], arch: str,
             note: str = "") -> dict:
    """The report (the module's layout) from ptxas's kernels, the SASS counts by mangled name (None: not read; the
    note says why) and demangled names by mangled name."""
    pending = {name: list(units) for name, units in (sass or {}).items()}
    out = []
    for k in kernels[:MAX_KERNELS]:
        units = pending.get(k.name) or []
        instructions = units.pop(0) if units else {}
        out.append({"name": shown_name(demangled.get(k.name, k.name)), "registers": k.registers,
                    "shared_bytes": k.shared_bytes, "constant_bytes": k.constant_bytes, "stack_bytes": k.stack_bytes,
                    "spill_store_bytes": k.spill_store_bytes, "spill_load_bytes": k.spill_load_bytes,
                    "instructions": instructions})
    if len(kernels) > MAX_KERNELS:
        note = "; ".join(filter(None, [note, f"{len(kernels) - MAX_KERNELS} more kernels not listed"]))
    return {"arch": arch, "note": shown_note(note), "kernels": out}


def shown_note(note: str) -> str:
    """A report's note: printable ASCII on one line, at most NOTE_CHARS."""
    clean = "".join(c if " " <= c <= "~" else " " for c in note)
    return clean if len(clean) <= NOTE_CHARS else clean[:NOTE_CHARS - 3] + "..."
