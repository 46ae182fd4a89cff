"""Issue 27, point 7: a CPU-only server took CUDA submissions and graded a correct file "compile error (Torch not
compiled with CUDA enabled)": the blame on the student. A server grading on the CPU now refuses .cu/.cuh at upload
(415, one line: it grades on the CPU and takes Python kernels only), and `convbench submit` shows that line."""

from __future__ import annotations

import pytest
from clihelp import assert_usage_error
from servicehelp import Server, add_team, database_url, run_convbench

pytest.importorskip("fastapi", reason="the service extra is not installed: pip install -e '.[test,service]'")

CUDA = "__global__ void conv_forward_kernel(float *y) {}\n"
REFUSAL = "this server grades on the CPU and only takes Python kernels (.py)"


def test_a_cpu_server_refuses_cuda_at_upload(tmp_path):
    """The attack (or the honest mistake): a .cu file, a folder with a .cuh beside Python, and a browser upload of a
    .cu, all sent to a CPU server. Each refused at once with the line; nothing is queued."""
    url = database_url("sqlite", tmp_path)
    token = add_team(url, "alpha")
    server = Server(url, tmp_path).start()  # --device cpu
    try:
        cu = tmp_path / "new-forward.cu"
        cu.write_text(CUDA)
        folder = tmp_path / "mixed"
        folder.mkdir()
        (folder / "kernel.py").write_text("def conv_forward(x, k):\n    return x\n")
        (folder / "helper.cuh").write_text(CUDA)
        for path in (cu, folder):
            done = run_convbench("submit", path, "--server", server.url, "--token", token)
            assert_usage_error(done.returncode, done.stdout, done.stderr, "the server refused (415)", REFUSAL)
        browser = server.api("POST", "/api/submissions", token, files={"file": ("new-forward.cuh", CUDA.encode())})
        assert browser.status_code == 415 and REFUSAL in browser.json()["error"]
        assert server.get("/api/teams/alpha", token).json()["submissions"] == []
        python = tmp_path / "good.py"
        python.write_text("def conv_forward(x, k):\n    return x\n")
        done = run_convbench("submit", python, "--server", server.url, "--token", token, "--no-wait")
        assert done.returncode == 0, done.stderr  # Python kernels still go in
    finally:
        server.kill()
