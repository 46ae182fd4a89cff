"""Whether this machine can grade untrusted code: `convbench serve` (its local graders) and `convbench worker` ask at
start, and refuse to run without a working sandbox unless the staff pass --allow-unsandboxed (trusted code only);
then every page carries a banner and /api/health says so.

The check itself is the sandbox's self-test, convbench.user.sandbox.self_test(device) -> SelfTest (ok, backend,
properties, problem: one line naming what failed and the fix)."""

from __future__ import annotations

from dataclasses import dataclass, field

from convbench.core import ui
from convbench.core.errors import UsageError
from convbench.user import sandbox, worker

FLAG = "--allow-unsandboxed"
BANNER = "Submissions on this server run without a sandbox: it is for trusted code only."


@dataclass(frozen=True)
class Sandboxing:
    """The self-test's answer, and whether the staff chose to run without it."""

    ok: bool
    backend: str
    problem: str = ""
    properties: dict[str, str] = field(default_factory=dict)
    unsandboxed: bool = False  # not ok, and FLAG given: grading anyway

    def to_json(self) -> dict:
        """For /api/health, which anyone may read: the verdict, not the properties (what the sandbox hides where)."""
        return {"ok": self.ok, "backend": self.backend, "problem": self.problem or None,
                "unsandboxed": self.unsandboxed}


def check(device: str, allow_unsandboxed: bool, command: str) -> Sandboxing:
    """Run the self-test: a working sandbox; else a UsageError naming the problem and the fix, or, with
    allow_unsandboxed, a warning on stderr and a Sandboxing that says so (the pages' banner)."""
    if not worker.enabled():  # whatever the machine could do: the service never grades in its own process
        result = sandbox.SelfTest(False, "none", {}, "CONVBENCH_SANDBOX=0 runs kernels in convbench's own process; "
                                                     "unset it")
    else:
        result = sandbox.self_test(device)
    ok, problem = bool(result.ok), str(result.problem or "").strip()
    state = Sandboxing(ok, str(result.backend), problem if not ok else "",
                       {str(k): str(v) for k, v in dict(result.properties or {}).items()})
    if ok:
        return state
    problem = (problem or "the sandbox's self-test failed").splitlines()[0]
    if not allow_unsandboxed:
        raise UsageError(f"{command}: no working sandbox for untrusted kernels: {problem}; or, to grade trusted code "
                         f"only, pass {FLAG}")
    ui.note(f"{command}: WARNING: grading without a sandbox ({problem}); {FLAG}: trusted code only")
    return Sandboxing(False, state.backend, problem, state.properties, unsandboxed=True)
