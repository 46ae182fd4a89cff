"""Issue 27, point 4: /login took 300 wrong tokens in 10 s. Failed sign-ins are now limited per client address (the
form, and a Bearer token on /api): past the limit every sign-in from that address is answered 429 with one line,
unchecked (a right token too: guessing gets no answer at all), while other addresses sign in as before. Against a
real `serve`; the other address comes through X-Forwarded-For, which uvicorn takes from a proxy on 127.0.0.1."""

from __future__ import annotations

import pytest
from servicehelp import Server, add_team, database_url

pytest.importorskip("fastapi", reason="the service extra is not installed: pip install -e '.[test,service]'")

import httpx  # noqa: E402

from convbench.service import web  # noqa: E402

LIMIT = web.Policy().signin_failures


def test_failed_sign_ins_are_limited_per_address(tmp_path):
    """The attack: guess tokens as fast as the server answers, on /login and with Bearer on /api."""
    url = database_url("sqlite", tmp_path)
    token = add_team(url, "alpha")
    server = Server(url, tmp_path).start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            guesses = [http.post("/login", data={"token": f"cb_guess{i}"}) for i in range(LIMIT)]
            assert all(r.status_code == 200 and 'id="failed"' in r.text for r in guesses)
            refused = http.post("/login", data={"token": "cb_guess-more"})
            assert refused.status_code == 429 and "too many failed sign-ins from 127.0.0.1" in refused.text
            assert refused.text.count('id="error"') == 1
            # the right token too, from this address: no oracle for the guesser
            assert http.post("/login", data={"token": token}, follow_redirects=False).status_code == 429
            api = http.get("/api/submissions/1", headers={"Authorization": f"Bearer {token}"})
            assert api.status_code == 429 and list(api.json()) == ["error"]
            assert api.json()["error"].startswith("too many failed sign-ins from 127.0.0.1: try again in ")
            # the public pages still answer (signed out), and so does health
            assert http.get("/").status_code == 200 and http.get("/api/health").status_code == 200
            # another address (through the proxy header) is not held back: its right token works, and its wrong
            # Bearer tokens on /api count as failures too
            other = {"X-Forwarded-For": "10.1.2.3"}
            assert http.post("/login", data={"token": token}, headers=other,
                             follow_redirects=False).status_code == 303
            wrong = [http.get("/api/leaderboard", headers=other).status_code]  # no token: not a failure
            wrong += [http.get("/api/submissions/1", headers={**other, "Authorization": f"Bearer cb_no{i}"})
                      .status_code for i in range(LIMIT + 1)]
            assert wrong[0] == 200 and set(wrong[1:LIMIT + 1]) == {401} and wrong[-1] == 429, wrong
    finally:
        server.kill()
