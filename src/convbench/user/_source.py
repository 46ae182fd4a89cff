"""Reading a user's C/CUDA source: comments out (for finding symbols), parameter lists, function definitions, the
first compiler error."""

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


def definitions(code: str, qualified_name: str):
    """The parameter lists of every *definition* (a body follows the `)`) of a function named `qualified_name` (a
    regex), in order; declarations and calls are skipped. Parameters may hold template arguments
    (`mshadow::Tensor<gpu, 4, float> &y`): commas inside <...> do not split. `code` should have no comments."""
    for m in re.finditer(rf"(?<![\w:]){qualified_name}\s*\(", code):
        close = _matching_paren(code, m.end() - 1)
        if close is not None and re.match(r"\s*(?:const\s*)?(?:noexcept\s*)?\{", code[close + 1:close + 200]):
            yield split_parameters(code[m.end():close])


def definition_parameters(code: str, qualified_name: str) -> list[str] | None:
    """The parameter list of the first definition of `qualified_name` (see `definitions`), None if there is none."""
    return next(definitions(code, qualified_name), None)


def split_parameters(inner: str) -> list[str]:
    """One string per parameter (whitespace normalized), splitting at commas outside <...>, (...) and [...]."""
    inner = " ".join(inner.split())
    if not inner or inner == "void":
        return []
    out, depth, start = [], 0, 0
    for i, c in enumerate(inner):
        if c in "<([":
            depth += 1
        elif c in ">)]":
            depth = max(0, depth - 1)
        elif c == "," and depth == 0:
            out.append(inner[start:i].strip())
            start = i + 1
    out.append(inner[start:].strip())
    return out


TYPE_WORDS = {"const", "volatile", "unsigned", "signed", "long", "short", "int", "char", "float", "double", "bool",
              "void", "size_t", "__restrict__", "__restrict", "restrict"}


def parameter_type(parameter: str) -> str:
    """A parameter's type without its name: `const float *host_y` -> `const float *`, `const int K` -> `const int`;
    an unnamed one (`const int`, `float *`, `unsigned int`) stays as it is. Default arguments are dropped."""
    parameter = parameter.split("=", 1)[0].strip()
    m = re.match(r"^(.*?)([A-Za-z_]\w*)$", parameter)
    if m is None or not m.group(1).strip() or m.group(2) in TYPE_WORDS:
        return parameter  # ends in `*`, `&` or a type word, or is one word: no name
    return m.group(1).strip()


def _matching_paren(code: str, open_at: int) -> int | None:
    depth = 0
    for i in range(open_at, min(len(code), open_at + 20000)):
        if code[i] == "(":
            depth += 1
        elif code[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return None


def kernel_names(code: str) -> set[str]:
    """The names of the __global__ functions `code` (no comments) defines or declares."""
    launch_bounds = r"(?:__launch_bounds__\s*\([^)]*\)\s*)?"
    return set(re.findall(rf"__global__\s+(?:static\s+|inline\s+)*void\s+{launch_bounds}(\w+)\s*[(<]", code))


# what `-Xptxas -v` prints for each kernel compiled before an error: statistics, never the error itself (a kernel
# may be named `error`)
PTXAS_INFO = re.compile(r"^(?:ptxas info\s*:|\d+ bytes stack frame, )")


def first_error(output: str, replacements: dict[str, str]) -> str:
    """The compiler's first error line, with build paths replaced by the names the user knows (ptxas's resource
    lines skipped)."""
    lines = [line.strip() for line in output.splitlines() if line.strip() and not PTXAS_INFO.match(line.strip())]
    pick = next((line for line in lines
                 if re.search(r"\berror\b|undefined reference|undefined symbol|multiple definition", line, re.I)),
                lines[0] if lines else "no compiler output")
    for old, new in replacements.items():
        pick = pick.replace(old, new)
    return pick
