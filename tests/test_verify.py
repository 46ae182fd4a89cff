"""`convbench verify` on a FAIL, with a deliberately wrong kernel file: the first wrong element of the worst failing
shape, the failing shapes, every line within 80 columns with no number cut, and `--json FILE`'s report; bad --json
paths are one line, exit 2, nothing written. The expected numbers are computed here, from problem.generate and the
float64 reference, not read back from verify."""

from __future__ import annotations

import contextlib
import io
import json
import re

import pytest
import torch
import torch.nn.functional as F
from clihelp import assert_usage_error, cli
from rich.cells import cell_len

from convbench.cli.main import main
from convbench.measure import problem
from convbench.measure.environment import environment

WRONG = -98765.4  # what the kernel writes into one element: far from any reference value, so it is the wrong one
KERNEL = f"""import torch.nn.functional as F


def conv_forward(x, k):
    y = F.conv2d(x, k)
    if x.shape[1] > 1:  # right on single-channel shapes, so that the report holds passes too
        y[0, 0, -1, -1] = {WRONG}
    return y
"""
SHAPES, SEED = 30, 7
LISTED = 10  # what verify lists of the failing shapes before "… and N more"


@pytest.fixture(scope="module")
def kernel_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("kernel") / "wrong_corner.py"
    path.write_text(KERNEL)
    return path


@pytest.fixture(scope="module")
def failed(kernel_file, tmp_path_factory):
    """One run of verify on the wrong kernel with --json: (exit code, stdout, stderr, the JSON file's text); once
    for the module, the kernel runs in its sandbox process."""
    json_path = tmp_path_factory.mktemp("out") / "verify.json"
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        mp.delenv("CONVBENCH_SANDBOX", raising=False)
        rc = main(["verify", "--impl", str(kernel_file), "--shapes", str(SHAPES), "--seed", str(SEED),
                   "--wide-shapes", "0", "--json", str(json_path)])
    return rc, out.getvalue(), err.getvalue(), json_path.read_text()


@pytest.fixture(scope="module")
def expected() -> list[dict]:
    """Per shape, in verify's order: the shape, whether the kernel fails it, its relative error and, where it
    fails, the reference value of the element it gets wrong."""
    rows = []
    for i, shape in enumerate(problem.shapes(SHAPES, SEED)):
        x, k = problem.generate(shape, SEED + i)
        ref = problem.reference(x, k)
        y = F.conv2d(x, k).double()
        fails = shape.C > 1
        if fails:
            y[0, 0, -1, -1] = torch.tensor(WRONG, dtype=torch.float32).double()
        rel = float(torch.linalg.vector_norm(y - ref) / torch.linalg.vector_norm(ref))
        rows.append({"shape": shape, "fails": fails, "rel": rel, "ref": float(ref[0, 0, -1, -1])})
    return rows


def failing(expected: list[dict]) -> list[dict]:
    return [r for r in expected if r["fails"]]


def test_the_run_fails_some_shapes_and_passes_others(failed, expected):
    rc, out, err, _ = failed
    assert rc == 1 and "Traceback" not in err, out + err
    assert LISTED < len(failing(expected)) < SHAPES  # the list is cut, and single-channel shapes pass
    assert f"wrong_corner: FAIL on {len(failing(expected))} of {SHAPES} shapes (tolerance 1e-05)" in out, out


def test_fail_names_the_first_wrong_element_of_the_worst_shape(failed, expected):
    out = " ".join(failed[1].split())  # the report's lines joined: wrapping is another test's
    m = re.search(r"first wrong element: layer (B=\d+ C=\d+ M=\d+ H=\d+ W=\d+ K=\d+), image (\d+), element "
                  r"\(m=(\d+), h=(\d+), w=(\d+)\): got (\S+), expected (\S+) \(layer error (\S+)\)", out)
    assert m, out
    worst = max(failing(expected), key=lambda r: r["rel"])
    _, M, Ho, Wo = worst["shape"].out
    assert m.group(1) == str(worst["shape"])
    assert m.groups()[1:5] == ("0", "0", str(Ho - 1), str(Wo - 1))
    assert float(m.group(6)) == pytest.approx(WRONG)
    assert m.group(7) == f"{worst['ref']:.6g}"
    assert m.group(8) == f"{worst['rel']:.2e}"


def test_fail_lists_the_failing_shapes_with_their_errors(failed, expected):
    lines = failed[1].splitlines()
    start = lines.index("  failing shapes, ||y - ref|| / ||ref||:") + 1
    fails = failing(expected)
    listed = lines[start:start + LISTED]
    for line, row in zip(listed, fails[:LISTED], strict=True):
        assert line.split() == [*str(row["shape"]).split(), f"{row['rel']:.2e}"], (line, row)
    assert lines[start + LISTED] == f"    … and {len(fails) - LISTED} more"
    passed = [str(r["shape"]) for r in expected if not r["fails"]]
    assert not any(s in line for s in passed for line in listed)


def test_fail_report_fits_80_columns_and_cuts_no_number(failed, expected):
    out = failed[1]
    lines = out.splitlines()
    assert max(cell_len(line) for line in lines) <= 80, [line for line in lines if cell_len(line) > 80]
    first = next(i for i, line in enumerate(lines) if "first wrong element" in line)
    assert lines[first + 1].startswith("    ") and "failing shapes" not in lines[first + 1]  # it was wrapped
    worst = max(failing(expected), key=lambda r: r["rel"])
    tokens = {token for line in lines for token in line.split()}  # a number cut at a line end is no token
    assert {f"{WRONG:g},", f"{worst['ref']:.6g}", f"{worst['rel']:.2e})"} <= tokens, out
    for row in failing(expected)[:LISTED]:
        assert any(str(row["shape"]) in line and f"{row['rel']:.2e}" in line for line in lines), row


def test_json_report(failed, expected):
    def no_inf_or_nan(name):
        raise AssertionError(f"not JSON: {name}")

    doc = json.loads(failed[3], parse_constant=no_inf_or_nan)
    assert doc["format"] == "convbench-verify/1"
    assert (doc["device"], doc["seed"], doc["shapes"], doc["ok"]) == ("cpu", SEED, SHAPES, False)
    assert set(doc["environment"]) == set(environment()) and doc["environment"]["command"]
    [impl] = doc["impls"]
    assert (impl["impl"], impl["tolerance"], impl["ok"], impl["failed"]) == ("wrong_corner", 1e-5, False,
                                                                             len(failing(expected)))
    assert len(impl["shapes"]) == SHAPES
    for got, row in zip(impl["shapes"], expected, strict=True):
        shape = row["shape"]
        assert got["shape"] == {"B": shape.B, "C": shape.C, "M": shape.M, "H": shape.H, "W": shape.W, "K": shape.K}
        assert got["ok"] is not row["fails"], got
        if row["fails"]:
            _, _, Ho, Wo = shape.out
            assert got["rel_error"] == pytest.approx(row["rel"], rel=1e-6)
            assert got["first_wrong"] == (f"layer {shape}, image 0, element (m=0, h={Ho - 1}, w={Wo - 1}): got "
                                          f"{WRONG:g}, expected {row['ref']:.6g} (layer error {row['rel']:.2e})")
        else:
            assert got["rel_error"] < impl["tolerance"] and got["first_wrong"] == ""
    assert impl["max_rel_error"] == pytest.approx(max(r["rel"] for r in expected), rel=1e-6)


def test_a_pass_prints_no_failure_report(capsys):
    rc, out, err = cli(capsys, "verify", "--impl", "reference", "--shapes", "2", "--seed", "1")
    assert rc == 0, out + err
    assert "first wrong element" not in out and "failing shapes" not in out


@pytest.mark.parametrize("where, fragments", [
    ("missing/verify.json", ("does not exist", "create it first")),
    ("folder", ("is a folder", "name a file inside it")),
    ("link.json", ("is a symlink", "name a new file instead")),
])
def test_json_bad_paths_are_one_line_and_write_nothing(capsys, tmp_path, kernel_file, where, fragments):
    (tmp_path / "folder").mkdir()
    (tmp_path / "kept.json").write_text("kept\n")
    (tmp_path / "link.json").symlink_to(tmp_path / "kept.json")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    rc, out, err = cli(capsys, "verify", "--impl", kernel_file, "--shapes", "2", "--json", tmp_path / where)
    assert_usage_error(rc, out, err, "--json", *fragments)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before and (tmp_path / "kept.json").read_text() == "kept\n"
