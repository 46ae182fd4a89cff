"""The built-in implementations as their files declare them, read without importing the files: an implementation
module imports torch, numba, CuPy or Triton, which `convbench impls` and `convbench leaderboard` must not wait for.

The `@conv_impl(...)` in each file stays the one source: this reads its arguments from the file's syntax tree and
turns them into ImplInfo with the same declare() that `@conv_impl` registers them with (core/impl_info.py). The
arguments that describe an implementation (DESCRIBING) must therefore be literals or module-level constants; its
code (setup, fused, tunables, ...) may be anything.
"""

from __future__ import annotations

import ast
import functools
import pkgutil
from pathlib import Path

from convbench.core.impl_info import ImplInfo, declare, listing_key

FOLDER = Path(__file__).parent
NOT_IMPLEMENTATIONS = {"registry", "catalog"}  # this folder's modules that declare none (helpers start with `_`)
DESCRIBING = ("name", "device", "summary", "demonstrates", "precision", "tolerance", "arithmetic", "variants",
              "summaries")


def implementation_modules() -> list[str]:
    """The names of this folder's implementation modules, one file each."""
    return [m.name for m in pkgutil.iter_modules([str(FOLDER)])
            if m.name not in NOT_IMPLEMENTATIONS and not m.name.startswith("_")]


@functools.cache  # the files do not change while convbench runs; results.py asks once per results file
def declared() -> tuple[ImplInfo, ...]:
    """Every built-in implementation, in listing order (registry.all_impls() has the same ones, imported)."""
    infos = [info for module in implementation_modules() for info in _declared_in(module)]
    return tuple(sorted(infos, key=listing_key))


def _declared_in(module: str) -> list[ImplInfo]:
    path = FOLDER / f"{module}.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    constants = _constants(tree)
    infos = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for decorator in node.decorator_list:
            if isinstance(decorator, ast.Call) and _called(decorator.func) == "conv_impl":
                infos += _infos(decorator, f"{__package__}.{module}", constants, path)
    if not infos:
        raise ValueError(f"{path}: no function decorated with @conv_impl(...) at the top level; every module of "
                         f"{FOLDER} not starting with '_' is an implementation")
    return infos


def _infos(call: ast.Call, module: str, constants: dict, path: Path) -> list[ImplInfo]:
    given = {kw.arg: kw.value for kw in call.keywords if kw.arg is not None}
    if call.args:
        given["name"] = call.args[0]
    args = {}
    for key in DESCRIBING:
        if key in given:
            try:
                args[key] = _value(given[key], constants)
            except ValueError:
                raise ValueError(f"{path}:{given[key].lineno}: @conv_impl's {key}= is neither a literal nor a "
                                 "module-level constant; `convbench impls` reads it without importing the file"
                                 ) from None
    fused = "fused" in given and not (isinstance(given["fused"], ast.Constant) and given["fused"].value is None)
    return declare(args.pop("name"), module, fused=fused, **args)


def _called(func: ast.expr) -> str:
    """conv_impl for both `conv_impl(...)` and `contract.conv_impl(...)`."""
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _constants(tree: ast.Module) -> dict:
    """The module's top-level NAME = literal assignments (also NAME, OTHER = literal, anything)."""
    found = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            unpacked = isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple)
            pairs = zip(target.elts, node.value.elts) if unpacked else [(target, node.value)]
            for name, value in pairs:
                if isinstance(name, ast.Name):
                    try:
                        found[name.id] = ast.literal_eval(value)
                    except ValueError:
                        found.pop(name.id, None)  # not a literal (any more): not a constant this can read
    return found


def _value(node: ast.expr, constants: dict):
    if isinstance(node, ast.Name):
        if node.id not in constants:
            raise ValueError(node.id)
        return constants[node.id]
    return ast.literal_eval(node)
