"""Reading a user's C/CUDA source: comments out (for finding symbols), parameter lists, the first compiler error."""

from __future__ import annotations

import re
from pathlib import Path

from convbench.core.errors import UsageError


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise UsageError(f"cannot read kernel file {path}: {e.strerror or e}") from None


def strip_comments(source: str) -> str:
    """The source with // and /* */ comments blanked (newlines kept, so line numbers stay); string literals are
    skipped over so that a "//" inside one is not taken for a comment."""
    out, i, n = [], 0, len(source)
    while i < n:
        c = source[i]
        if c == '"' or c == "'":
            j = i + 1
            while j < n and source[j] != c and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            out.append(source[i:j + 1])
            i = j + 1
        elif source.startswith("//", i):
            j = source.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif source.startswith("/*", i):
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", source[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def parameters(code: str, qualified_name: str, require: str | None = None) -> list[str] | None:
    """The parameter list (one string per parameter, whitespace normalized) of the first function named
    `qualified_name` (a regex, e.g. r"GPUInterface\\s*::\\s*conv_forward_gpu") whose declaration, back to the previous
    `;`, `}` or `{`, contains `require` (e.g. "__global__"); None if there is none. `code` should have no comments."""
    for m in re.finditer(rf"(?<![\w:]){qualified_name}\s*\(([^()]*)\)", code):
        head = code[max(code.rfind(";", 0, m.start()), code.rfind("}", 0, m.start()), code.rfind("{", 0, m.start())) + 1:m.start()]
        if require is not None and require not in head:
            continue
        inner = " ".join(m.group(1).split())
        return [p.strip() for p in inner.split(",")] if inner and inner != "void" else []
    return None


def first_error(output: str, replacements: dict[str, str]) -> str:
    """The compiler's first error line, with build paths replaced by the names the user knows."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    pick = next((line for line in lines if re.search(r"\berror\b|undefined reference|undefined symbol", line, re.I)),
                lines[0] if lines else "no compiler output")
    for old, new in replacements.items():
        pick = pick.replace(old, new)
    return pick
