"""The architecture as a checked contract: the layers of src/convbench import only downwards and no module takes
part in an import cycle (import-linter's `lint-imports`, configured in pyproject.toml), and no convbench import
hides inside a function to dodge one."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "convbench"
# The imports that may stay inside a function, and why: each defers a heavy or optional import, none dodges a cycle.
DEFERRED = {
    ("__init__.py", "convbench.api"): "the API loads torch: `import convbench` stays cheap",
    ("__init__.py", "convbench.core.errors"): "the same, for UsageError",
    ("impls/__init__.py", "convbench.impls.registry"): "the registry imports torch: impls/catalog.py stays cheap",
    ("impls/triton_01_igemm.py", "convbench.impls._triton_01_igemm_kernels"): "Triton is optional and slow to import",
}


def lint_imports() -> str:
    pytest.importorskip("importlinter", reason="import-linter is not installed (pip install -e '.[test]' has it)")
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if exe is None:
        pytest.fail("lint-imports is not installed: pip install -e '.[test]' (import-linter)")
    p = subprocess.run([exe, "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_layers_point_down_and_nothing_is_cyclic():
    out = lint_imports()
    assert "2 kept, 0 broken" in out, out


def test_the_contract_names_every_package():
    """A new top-level package must be placed in the layers (or lint-imports would not check it)."""
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["type"] == "layers")["layers"]
    named = {m.strip() for layer in layers for m in layer.split("|")}
    packages = {f"convbench.{p.name}" for p in SRC.iterdir() if (p / "__init__.py").is_file()}
    modules = {f"convbench.{p.stem}" for p in SRC.glob("*.py") if p.stem not in ("__init__", "__main__")}
    assert packages | modules <= named, sorted((packages | modules) - named)


def test_no_convbench_import_hides_inside_a_function():
    found = []
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    targets = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    targets = [f"{node.module}.{a.name}" for a in node.names]
                else:
                    continue
                rel = str(path.relative_to(SRC))
                found += [(rel, t) for t in targets
                          if t.startswith("convbench") and not any(t.startswith(d) for r, d in DEFERRED if r == rel)]
    assert not found, found
