"""What the sandbox's adversarial tests share: a Python kernel that runs an attack inside the sandbox and reports what
it saw, and the rule that in CI the sandbox must exist (a test that skips there is an attack untested)."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from convbench import user
from convbench.user import sandbox

MARK = "ATTACK-RESULT:"


def require_sandbox(device: str = "cpu") -> sandbox.SelfTest:
    """The self-test, passed; else skip with its reason (in CI, fail: the sandbox must exist there)."""
    result = sandbox.self_test(device)
    if not result.ok:
        reason = f"the sandbox cannot be made here: {result.problem}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; in CI the adversarial tests must run", pytrace=False)
        pytest.skip(reason)
    return result


def attack_kernel(folder: Path, name: str, attack: str, at_import: str = "") -> Path:
    """A kernel file whose conv_forward runs `attack` (Python statements that fill the dict `seen`), prints `seen`
    as JSON after MARK, and returns the right answer (so that only the attack decides the test)."""
    body = textwrap.indent(textwrap.dedent(attack).strip(), "        ")
    path = folder / name
    path.write_text(f"""import json, os, sys
import torch.nn.functional as F
{textwrap.dedent(at_import).strip()}

def conv_forward(x, k):
    seen = {{}}
    try:
{body}
    except BaseException as e:
        seen["raised"] = f"{{type(e).__name__}}: {{e}}"
    print("{MARK}" + json.dumps(seen, default=str), flush=True)
    return F.conv2d(x, k)
""")
    return path


def run_attack(path: Path) -> dict:
    """Run the kernel at `path` once in its sandbox (as `run` / `verify` do) and return what the attack saw."""
    impl = user.load(path)
    worker = impl.fn.worker
    worker.quiet = True
    x, k = torch.randn(2, 1, 6, 6), torch.randn(3, 1, 3, 3)
    y = impl(x, k)
    torch.testing.assert_close(y, F.conv2d(x, k))
    text = worker.captured_text()
    lines = [line for line in text.splitlines() if line.startswith(MARK)]
    assert lines, f"the attack reported nothing; its output: {text[-2000:]}"
    return json.loads(lines[-1][len(MARK):])
