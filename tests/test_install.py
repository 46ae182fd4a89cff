"""What each install gets (pyproject's extras), and the one line a missing extra gives."""

import importlib.util
import re
import tomllib

import pytest

from conftest import REPO

PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def names(requirements: list[str]) -> set[str]:
    return {re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower() for r in requirements}


def test_a_cpu_install_is_light():
    """No Triton, no PostgreSQL driver, no matplotlib unless their extra is asked for."""
    extras = PROJECT["optional-dependencies"]
    heavy = {"triton", "psycopg", "matplotlib"}
    assert not heavy & names(PROJECT["dependencies"])
    assert not {"triton", "psycopg"} & names(extras["test"])
    assert "psycopg" not in names(extras["service"])
    assert names(extras["triton"]) == {"triton"}
    assert "psycopg" in names(extras["postgres"]) and "matplotlib" in names(extras["plots"])


def test_the_pins_that_reproduce():
    deps = PROJECT["dependencies"]
    assert "scikit-image==0.26.*" in deps  # the course's published Correctness
    assert "torch==2.13.*" in deps  # what setup installs
    assert "torch==2.13.0" in (REPO / "scripts" / "setup.sh").read_text()


def test_a_postgresql_url_without_psycopg_is_one_line(monkeypatch):
    pytest.importorskip("sqlalchemy", reason="the service extra is not installed: pip install -e '.[test,service]'")
    from convbench.core.errors import UsageError
    from convbench.service import db

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "psycopg" else real(name, *a))
    with pytest.raises(UsageError) as e:
        db.engine_for("postgresql://u:p@127.0.0.1/convbench")
    assert "pip install 'convbench[postgres]'" in str(e.value) and "\n" not in str(e.value)
