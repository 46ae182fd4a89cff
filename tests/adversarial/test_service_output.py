"""Issue 27, point 5: what a kernel prints reached the terminal of `convbench submit` and the pages raw: ANSI escapes
(clear the screen, retitle the window), carriage returns, text-direction overrides. Now every place that shows it
escapes its control characters (`\\x1b`, `\\u202e`), visibly, whatever form the JSON keeps the text in."""

from __future__ import annotations

import pytest
from servicehelp import Server, add_team, database_url, run_convbench

pytest.importorskip("fastapi", reason="the service extra is not installed: pip install -e '.[test,service]'")

from convbench.core.printable import visible  # noqa: E402

HOSTILE = "\x1b[2J\x1b]0;pwned\x07\rgrade: 100\u202etxt.exe\x9b31m"
PRINTS = ("import torch.nn.functional as F\n"
          f"def conv_forward(x, k):\n    print({HOSTILE!r}, flush=True)\n    return F.conv2d(x, k)\n")
RAISES = f"def conv_forward(x, k):\n    raise RuntimeError({HOSTILE!r})\n"
CONTROL = ("\x1b", "\x07", "\r", "\u202e", "\x9b")


def _clean(text: str) -> bool:
    return not any(c in text for c in CONTROL)


def test_visible_escapes_every_control_and_direction_character():
    """The escaping itself: each control character of the attack shown as its escape, newlines and tabs kept."""
    assert visible(HOSTILE + "\n\tok") == ("\\x1b[2J\\x1b]0;pwned\\x07\\x0dgrade: 100\\u202etxt.exe\\x9b31m\n\tok")
    assert visible("line\r\n") == "line\n"


@pytest.mark.parametrize("kind", ["sqlite"])
def test_kernel_text_is_escaped_in_submit_and_the_pages(kind, tmp_path):
    """The attack: a kernel that prints terminal escapes on every call, and one whose error message is made of them.
    `convbench submit` prints both escaped (the output under "what it printed", the error in the verdict line), and
    the submission page shows them escaped."""
    url = database_url(kind, tmp_path)
    token = add_team(url, "mallory")
    server = Server(url, tmp_path).start()
    try:
        for name, body, verdict in (("prints.py", PRINTS, "ok"), ("raises.py", RAISES, "crash")):
            path = tmp_path / name
            path.write_text(body)
            out = run_convbench("submit", path, "--server", server.url, "--token", token, timeout=600)
            assert _clean(out.stdout) and _clean(out.stderr), (out.stdout, out.stderr)
            assert f": {verdict}" in out.stdout and "\\x1b[2J\\x1b]0;pwned\\x07" in out.stdout, out.stdout
            sub_id = int(out.stdout.split("#", 1)[1].split(":", 1)[0])
            raw = server.get(f"/api/submissions/{sub_id}", token).json()
            grade = raw["result"]["grade"]
            assert "pwned" in (grade.get("output") or "") + (grade.get("detail") or ""), grade  # the JSON has it
            page = server.get(f"/submissions/{sub_id}", token).text
            assert _clean(page) and "\\x1b[2J\\x1b]0;pwned\\x07" in page, page[-2000:]
    finally:
        server.kill()
