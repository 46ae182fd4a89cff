"""The launch declaration of an MXNet-era kernel file, and the small, safe expression language it uses.

A kernel file (`forward_kernel(y, x, k, B, M, C, H, W, K)`) says how to launch itself in one comment line:

    // convbench: grid=(B, M, ceil(H_out/16)*ceil(W_out/16)) block=(16, 16, 1) shared=(16+K-1)*(16+K-1)*4 constant=kc

grid and block: one to three expressions each; shared: bytes of dynamic shared memory (default 0); constant: the
name of a `__constant__ float NAME[SIZE]` array that convbench fills with the weights k (contiguous) before the
kernel runs. Expressions use the layer's B, M, C, H, W, K, H_out, W_out, integer `#define`s of the file, integers,
+ - * / // % and parentheses, ceil(), min(), max() and sizeof(float|double|half|int). `/` is exact division (so that
ceil(H_out/16) means what it says); every grid and block size must come out a whole number.

Nothing is evaluated by Python: the text is parsed with `ast` and walked by a tiny interpreter that knows only the
nodes above (exact arithmetic with Fraction); anything else (a call to another function, an attribute, a string,
`__import__('os')`) is rejected with a message naming it.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field
from fractions import Fraction

from convbench.core.errors import UsageError

SHAPE_NAMES = ("B", "M", "C", "H", "W", "K", "H_out", "W_out")
FUNCTIONS = ("ceil", "min", "max", "sizeof")
SIZEOF = {"float": 4, "double": 8, "half": 2, "__half": 2, "int": 4}
EXPECTED = ("// convbench: grid=(X, Y, Z) block=(X, Y, Z) [shared=BYTES] [constant=NAME]  "
            "(expressions over B, M, C, H, W, K, H_out, W_out)")
MAX_EXPRESSION = 300  # characters; a declaration is one short line
MAX_MAGNITUDE = 2**63  # every value (and a fraction's numerator and denominator) stays within 64 bits
MAX_DEFINES = 10_000  # integer #defines read from one file
MARKER = re.compile(r"^[ \t]*//[ \t]*convbench[ \t]*:(.*)$", re.MULTILINE)  # [ \t], not \s: linear time

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%"}


class ExprError(ValueError):
    """An expression that is not in the language, or that cannot be evaluated (division by zero)."""


class ExprTooLarge(ExprError):
    """A value beyond MAX_MAGNITUDE: chained #defines that multiply would otherwise grow without bound (and hang)."""


@dataclass(frozen=True)
class Expr:
    """A parsed expression; `evaluate(names)` is exact (int or Fraction)."""

    text: str
    tree: ast.expr = field(repr=False, compare=False)

    def evaluate(self, names: dict[str, int]) -> int | Fraction:
        return _eval(self.tree, names)


def parse_expr(text: str, names: tuple[str, ...] | set[str] = SHAPE_NAMES) -> Expr:
    """Parse one expression, allowing only the nodes of the language and the given names."""
    text = text.strip()
    if not text:
        raise ExprError("empty expression")
    if len(text) > MAX_EXPRESSION:
        raise ExprError(f"expression longer than {MAX_EXPRESSION} characters")
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        raise ExprError(f"{text!r} is not an expression") from None
    _check(tree, set(names))
    return Expr(text, tree)


def _check(node: ast.AST, names: set[str]) -> None:
    if isinstance(node, ast.Constant):
        if type(node.value) is not int:  # bool is an int subclass: excluded too
            raise ExprError(f"{node.value!r} is not allowed (only whole numbers)")
    elif isinstance(node, ast.Name):
        if node.id not in names:
            raise ExprError(f"name {node.id!r} is not allowed (use {', '.join(sorted(names, key=_name_order))})")
    elif isinstance(node, ast.BinOp):
        if type(node.op) not in _BINOPS:
            raise ExprError(f"operator {type(node.op).__name__} is not allowed (use + - * / // %)")
        _check(node.left, names)
        _check(node.right, names)
    elif isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, (ast.UAdd, ast.USub)):
            raise ExprError(f"operator {type(node.op).__name__} is not allowed")
        _check(node.operand, names)
    elif isinstance(node, ast.Call):
        fn = node.func.id if isinstance(node.func, ast.Name) else None
        if fn not in FUNCTIONS:
            shown = ast.unparse(node.func)
            raise ExprError(f"call of {shown!r} is not allowed (only {', '.join(f + '()' for f in FUNCTIONS)})")
        if node.keywords:
            raise ExprError(f"{fn}() takes no keyword arguments")
        if fn == "sizeof":
            if len(node.args) != 1 or not isinstance(node.args[0], ast.Name) or node.args[0].id not in SIZEOF:
                raise ExprError(f"sizeof() takes one of {', '.join(SIZEOF)}")
            return
        if fn == "ceil" and len(node.args) != 1:
            raise ExprError("ceil() takes one argument")
        if fn in ("min", "max") and len(node.args) < 2:
            raise ExprError(f"{fn}() takes two or more arguments")
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise ExprError("* arguments are not allowed")
            _check(a, names)
    else:
        raise ExprError(f"{type(node).__name__} {ast.unparse(node)!r} is not allowed")


def _name_order(name: str) -> tuple[int, str]:
    return (SHAPE_NAMES.index(name) if name in SHAPE_NAMES else len(SHAPE_NAMES), name)


def _eval(node: ast.AST, names: dict[str, int]) -> int | Fraction:
    if isinstance(node, ast.Constant):
        return _normal(node.value)
    if isinstance(node, ast.Name):
        return _normal(names[node.id])
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, names)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, names), _eval(node.right, names)
        op = _BINOPS[type(node.op)]
        if op in ("/", "//", "%") and b == 0:
            raise ExprError(f"division by zero in {ast.unparse(node)!r}")
        if op == "+":
            v = a + b
        elif op == "-":
            v = a - b
        elif op == "*":
            v = a * b
        elif op == "/":
            v = Fraction(a) / Fraction(b)
        elif op == "//":
            v = a // b
        else:
            v = a % b
        return _normal(v)
    if isinstance(node, ast.Call):
        fn = node.func.id
        if fn == "sizeof":
            return SIZEOF[node.args[0].id]
        args = [_eval(a, names) for a in node.args]
        if fn == "ceil":
            return math.ceil(args[0])
        return _normal(min(args) if fn == "min" else max(args))
    raise ExprError(f"cannot evaluate {ast.unparse(node)!r}")  # unreachable after _check


def _normal(v: int | Fraction) -> int | Fraction:
    """v as an int where it is whole; an ExprTooLarge where it leaves 64 bits (checked after every operation, so
    no value ever grows large: evaluation time stays proportional to the expression's length)."""
    if isinstance(v, Fraction):
        if abs(v.numerator) > MAX_MAGNITUDE or v.denominator > MAX_MAGNITUDE:
            raise ExprTooLarge(f"a value leaves 64 bits ({float(v):.3g})")
        return int(v) if v.denominator == 1 else v
    if abs(v) > MAX_MAGNITUDE:
        raise ExprTooLarge(f"a value leaves 64 bits (about 2^{v.bit_length()})")
    return v


# ------------------------------------------------------------------------------------------------ declaration


@dataclass(frozen=True)
class LaunchDecl:
    grid: tuple[Expr, ...]
    block: tuple[Expr, ...]
    shared: Expr | None = None
    constant: str | None = None
    defines: tuple[tuple[str, int], ...] = ()  # integer #defines of the file the expressions may use

    def names(self, B: int, M: int, C: int, H: int, W: int, K: int) -> dict[str, int]:
        return {**dict(self.defines), "B": B, "M": M, "C": C, "H": H, "W": W, "K": K,
                "H_out": H - K + 1, "W_out": W - K + 1}

    def evaluate(self, B: int, M: int, C: int, H: int, W: int, K: int) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
        """(grid, block, shared bytes) for one layer shape; a UsageError names the part that does not work out."""
        names = self.names(B, M, C, H, W, K)
        shape = f"B={B} M={M} C={C} H={H} W={W} K={K}"

        def whole(part: str, e: Expr) -> int:
            try:
                v = e.evaluate(names)
            except ExprError as err:
                raise UsageError(f"launch declaration: {part} = {e.text}: {err} (at {shape})") from None
            if isinstance(v, Fraction):
                raise UsageError(f"launch declaration: {part} = {e.text} is {float(v):g} at {shape}, not a whole "
                                 "number; round it with ceil(...) or //")
            return v

        grid = [whole(f"grid.{'xyz'[i]}", e) for i, e in enumerate(self.grid)]
        block = [whole(f"block.{'xyz'[i]}", e) for i, e in enumerate(self.block)]
        grid += [1] * (3 - len(grid))
        block += [1] * (3 - len(block))
        shared = whole("shared", self.shared) if self.shared is not None else 0
        for part, dims, limits in (("grid", grid, (2**31 - 1, 65535, 65535)), ("block", block, (1024, 1024, 64))):
            for axis, v, hi in zip("xyz", dims, limits):
                if not 1 <= v <= hi:
                    raise UsageError(f"launch declaration: {part}.{axis} = {v} at {shape}; CUDA allows 1 to {hi}")
        if block[0] * block[1] * block[2] > 1024:
            raise UsageError(f"launch declaration: block = {tuple(block)} is {block[0] * block[1] * block[2]} threads at "
                             f"{shape}; CUDA allows at most 1024 per block")
        if shared < 0:
            raise UsageError(f"launch declaration: shared = {shared} bytes at {shape}; it must be >= 0")
        return tuple(grid), tuple(block), shared


_DEFINE = re.compile(r"[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(?:[ \t]+|$)")
MAX_DEFINE_LINE = 4 * MAX_EXPRESSION  # a longer #define (comments included) is not a launch constant: skipped


def integer_defines(source: str) -> dict[str, int]:
    """`#define NAME <integer expression>` lines of a C file, in order (later ones may use earlier ones); anything
    else (macros with arguments, floats, expressions over unknown names) is skipped. Line by line, with no
    backtracking regex over a whole line, and every value bounded (ExprTooLarge): linear in the file's size."""
    found: dict[str, int] = {}
    count = 0
    for line in source.split("\n"):
        m = _DEFINE.match(line)
        if not m:
            continue
        count += 1
        if count > MAX_DEFINES:
            raise UsageError(f"more than {MAX_DEFINES} #define lines; split the file or drop unused defines")
        name, body = m.group(1), line[m.end():]
        if len(body) > MAX_DEFINE_LINE:
            continue
        body = re.sub(r"/\*.*?\*/", "", body.split("//", 1)[0]).strip()
        body = re.sub(r"(?<=\d)[uUlL]+\b", "", body)  # 16u, 1024L
        if name in SHAPE_NAMES or not body:
            continue
        try:
            v = parse_expr(body, set(found)).evaluate(found)
        except ExprTooLarge as e:
            raise UsageError(f"#define {name} {body[:60]}: {e}; keep #define values within 64 bits") from None
        except ExprError:
            continue
        if isinstance(v, int):
            found[name] = v
    return found


def _split_keys(text: str) -> list[tuple[str, str]]:
    """[(key, value)] of `key=value key=value ...`: a key is a word followed by `=` outside parentheses and after
    whitespace (or at the start); its value runs to the next key, so values may contain spaces."""
    text = re.sub(r"\s*=\s*", "=", text.strip())
    depth, depths = 0, []
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        depths.append(depth)
        if depth < 0:
            raise ExprError("unbalanced parentheses")
    if depth != 0:
        raise ExprError("unbalanced parentheses")
    keys = [m for m in re.finditer(r"(?:^|(?<=\s))([A-Za-z_]\w*)=", text) if depths[m.start()] == 0]
    if not keys:
        raise ExprError("no key=value")
    if text[:keys[0].start()].strip():
        raise ExprError(f"unexpected {text[:keys[0].start()].strip()!r}")
    ends = [m.start() for m in keys[1:]] + [len(text)]
    return [(m.group(1), text[m.end():end].strip()) for m, end in zip(keys, ends)]


def _tuple(value: str, names: set[str]) -> tuple[Expr, ...]:
    """`(x, y, z)`, `(x, y)`, `x` or `x, y, z`: one to three expressions."""
    if len(value) > 3 * MAX_EXPRESSION:
        raise ExprError(f"longer than {3 * MAX_EXPRESSION} characters")
    try:
        node = ast.parse(value, mode="eval").body
    except SyntaxError:
        raise ExprError(f"{value!r} is not a tuple of expressions") from None
    items = list(node.elts) if isinstance(node, ast.Tuple) else [node]
    if not 1 <= len(items) <= 3:
        raise ExprError(f"{len(items)} sizes; give 1 to 3 (x, y, z)")
    exprs = []
    for item in items:
        _check(item, names)
        exprs.append(Expr(ast.unparse(item), item))
    return tuple(exprs)


def parse_declaration(line: str, defines: dict[str, int] | None = None) -> LaunchDecl:
    """Parse the text after `// convbench:`; a UsageError says which part is wrong and what is expected."""
    if len(line) > 8 * MAX_EXPRESSION:
        raise UsageError(f"bad launch declaration: {len(line)} characters long; expected {EXPECTED}")
    defines = dict(defines or {})
    names = set(SHAPE_NAMES) | set(defines)
    values: dict[str, str] = {}
    try:
        pairs = _split_keys(line)
    except ExprError as e:
        raise UsageError(f"bad launch declaration {line.strip()!r}: {e}; expected {EXPECTED}") from None
    for key, value in pairs:
        if not value:
            raise UsageError(f"bad launch declaration: {key}= has no value; expected {EXPECTED}")
        if key not in ("grid", "block", "shared", "constant"):
            raise UsageError(f"bad launch declaration: unknown key {key!r} (grid, block, shared, constant); "
                             f"expected {EXPECTED}")
        if key in values:
            raise UsageError(f"bad launch declaration: {key} is given twice; expected {EXPECTED}")
        values[key] = value
    for key in ("grid", "block"):
        if key not in values:
            raise UsageError(f"bad launch declaration: no {key}=...; expected {EXPECTED}")
    try:
        grid = _tuple(values["grid"], names)
    except ExprError as e:
        raise UsageError(f"bad launch declaration: grid={values['grid']}: {e}; expected {EXPECTED}") from None
    try:
        block = _tuple(values["block"], names)
    except ExprError as e:
        raise UsageError(f"bad launch declaration: block={values['block']}: {e}; expected {EXPECTED}") from None
    shared = None
    if "shared" in values:
        try:
            shared = parse_expr(values["shared"], names)
        except ExprError as e:
            raise UsageError(f"bad launch declaration: shared={values['shared']}: {e}; expected {EXPECTED}") from None
    constant = values.get("constant")
    if constant is not None and not re.fullmatch(r"[A-Za-z_]\w*", constant):
        raise UsageError(f"bad launch declaration: constant={constant} is not a C identifier; expected {EXPECTED}")
    return LaunchDecl(grid, block, shared, constant, tuple(sorted(defines.items())))


def find_declaration(source: str, where: str) -> LaunchDecl:
    """The file's one `// convbench:` line, parsed (a UsageError when there is none or more than one)."""
    lines = MARKER.findall(source)
    if not lines:
        raise UsageError(f"{where} has no launch declaration; add a comment line like "
                         "`// convbench: grid=(B, M, ceil(H_out/16)*ceil(W_out/16)) block=(16, 16, 1)`")
    if len(lines) > 1:
        raise UsageError(f"{where} has {len(lines)} `// convbench:` launch declarations; keep one")
    try:
        return parse_declaration(lines[0], integer_defines(source))
    except UsageError as e:
        raise UsageError(f"{where}: {e}") from None
