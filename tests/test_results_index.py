"""results/README.md's list of the default runs is current: written from the manifests by scripts/results_index.py."""

import importlib.util

from conftest import REPO

spec = importlib.util.spec_from_file_location("results_index", REPO / "scripts" / "results_index.py")
index = importlib.util.module_from_spec(spec)
spec.loader.exec_module(index)


def test_defaults_section_is_current():
    text = index.README.read_text()
    assert index.render(text) == text, "results/README.md's defaults are stale: run python scripts/results_index.py"


def test_every_run_folder_has_a_row():
    assert index.missing_rows(index.README.read_text()) == []

