"""Issue 27, point 2: what a request brings is bounded before the database. Ids of 2^63 and more (SQLite) or 2^31
(PostgreSQL) gave 500, and on PostgreSQL so did a milestone over 32 characters, a file name over 255 and a NUL
character. Every id (path and query), field and query number is now checked first: 400, 404 or 422 with one line,
never 500, on both databases, through the real application (a 500 raises in the test client)."""

from __future__ import annotations

import pytest
from servicehelp import database_url

pytest.importorskip("fastapi", reason="the service extra is not installed: pip install -e '.[test,service]'")

from fastapi.testclient import TestClient  # noqa: E402

from convbench.service import db, store, web  # noqa: E402
from convbench.service.archive import single_file  # noqa: E402

GOOD = b"import torch.nn.functional as F\ndef conv_forward(x, k):\n    return F.conv2d(x, k)\n"
HUGE = [2**31, 2**63, 2**64 + 5, 10**30, -1, 0]


@pytest.fixture(params=["sqlite", "postgresql"])
def app(request, tmp_path):
    sessions = db.connect(database_url(request.param, tmp_path))
    tokens = {"alpha": store.add_team(sessions, "alpha"), "boss": store.add_team(sessions, "boss", staff=True)}
    return TestClient(web.create_app(sessions, web.Policy(rate_limit_s=0, device="cpu"))), tokens


def _one_line(reply, statuses=(400, 404, 422)) -> str:
    assert reply.status_code in statuses, (reply.status_code, reply.text[:300])
    body = reply.json()
    assert list(body) == ["error"] and "\n" not in body["error"] and body["error"], body
    return body["error"]


def test_ids_out_of_any_database_range_are_404_not_500(app):
    """The attack: /api/submissions/9223372036854775808 and friends, on every endpoint that takes an id."""
    client, tokens = app
    staff = {"Authorization": f"Bearer {tokens['boss']}"}
    for n in HUGE:
        for method, path, who in [("GET", f"/api/submissions/{n}", tokens["alpha"]),
                                  ("GET", f"/api/submissions/{n}", tokens["boss"]),
                                  ("POST", f"/api/admin/submissions/{n}/rerun", tokens["boss"]),
                                  ("POST", f"/api/admin/submissions/{n}/hide", tokens["boss"])]:
            reply = client.request(method, path, headers={"Authorization": f"Bearer {who}"})
            assert f"no submission {n}" in _one_line(reply, (404,)), (method, path)
        for page in (f"/submissions/{n}", f"/submissions/{n}/layers.png"):
            reply = client.get(page, headers={"Authorization": f"Bearer {tokens['alpha']}"})
            assert reply.status_code == 404 and f"no submission {n}" in reply.text, page
    for bad in ("abc", "1.5", "1e9", "%00"):
        assert "sub_id" in _one_line(client.get(f"/api/submissions/{bad}", headers=staff), (422,))
    assert "top" in _one_line(client.post(f"/api/admin/retime?top={2**70}", headers=staff), (400,))
    assert "hidden" in _one_line(client.post("/api/admin/submissions/1/hide?hidden=maybe", headers=staff), (422,))


@pytest.mark.parametrize("field, value, fragment", [
    ("milestone", "m" * 33, "milestone"),
    ("milestone", "m3\x00", "milestone"),
    ("milestone", "../m3", "milestone"),
    ("filename", "k" * 253 + ".py", "file name"),
    ("filename", "k\x00.py", "file name"),
    ("filename", "k\x1b[2J.py", "file name"),
    ("archive-top", "k" * 253 + ".py", "over 255 characters"),
    ("archive-top", "k\x1b]0;x\x07.py", "control characters"),
])
def test_upload_fields_are_bounded_before_the_database(app, field, value, fragment):
    """The attack: a milestone, a file name (browser form or archive) the columns cannot hold, or with NUL (which
    PostgreSQL refuses) or terminal escapes. 400 with one line; nothing stored."""
    client, tokens = app
    auth = {"Authorization": f"Bearer {tokens['alpha']}"}
    if field == "milestone":
        reply = client.post("/api/submissions", files={"file": ("good.py", GOOD)}, data={"milestone": value},
                            headers=auth)
    elif field == "filename":  # the form as bytes: httpx would escape a NUL in a file name, an attacker need not
        body = (b'--b\r\nContent-Disposition: form-data; name="file"; filename="' + value.encode() + b'"\r\n'
                b"Content-Type: text/x-python\r\n\r\n" + GOOD + b"\r\n--b--\r\n")
        reply = client.post("/api/submissions", content=body,
                            headers={**auth, "Content-Type": "multipart/form-data; boundary=b"})
    else:
        reply = client.post("/api/submissions", files={"file": ("k.tar.gz", single_file(value, GOOD))}, headers=auth)
    assert fragment in _one_line(reply, (400,))
    assert client.get("/api/teams/alpha", headers=auth).json()["submissions"] == []


@pytest.mark.parametrize("path", [
    "/api/leaderboard?milestone=" + "m" * 40,
    "/api/leaderboard?milestone=%00",
    "/?milestone=" + "m" * 40,
    "/api/admin/gradebook.csv?milestone=" + "m" * 40,
    "/api/admin/gradebook.csv?full_ms=nan",
    "/api/admin/gradebook.csv?zero_ms=inf",
    "/api/admin/gradebook.csv?zero_ms=1e999",
    "/api/admin/gradebook.csv?full_ms=-1",
    "/api/admin/gradebook.csv?full_ms=x",
    "/api/teams/" + "t" * 100,
    "/api/teams/%00",
    "/teams/" + "t" * 100,
    "/api/admin/teams/" + "t" * 100 + "/ban",
])
def test_query_values_and_names_are_bounded_before_the_database(app, path):
    """The attack: over-long or NUL milestones, NaN or infinite gradebook thresholds, team names no team can have."""
    client, tokens = app
    method = "POST" if path.endswith("/ban") else "GET"
    reply = client.request(method, path, headers={"Authorization": f"Bearer {tokens['boss']}"})
    if path.startswith("/api/"):
        _one_line(reply)
    else:
        assert reply.status_code in (400, 404) and reply.text.count('id="error"') == 1, reply.text[:300]
