"""The documentation builds with MkDocs in strict mode (any warning fails), and its API
reference covers the package's public names."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pymc_crais

ROOT = Path(__file__).resolve().parent.parent


def test_mkdocs_build_is_clean(tmp_path):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{output[-6000:]}"
    assert "WARNING" not in output, output[-6000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    assert 'id="pymc_crais.sample_crais"' in api, "the API page has no sample_crais entry"


def test_api_reference_lists_every_public_name():
    text = (ROOT / "docs" / "api.md").read_text()
    documented = set(re.findall(r"^::: pymc_crais\.(\w+)\s*$", text, flags=re.MULTILINE))
    modules = {"datasets", "models", "__version__"}
    missing = sorted(set(pymc_crais.__all__) - modules - documented)
    assert not missing, f"docs/api.md does not document {missing}; add '::: pymc_crais.NAME'"


def test_nav_lists_every_page():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    missing = [p for p in pages if f": {p}" not in nav]
    assert not missing, f"mkdocs.yml's nav does not list {missing}"


def test_no_docs_page_is_over_800_lines():
    """Docs pages are for users (issue 32); measurement logs live in benchmarks/reports/."""
    long = {
        p.name: n
        for p in sorted((ROOT / "docs").glob("*.md"))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 800
    }
    assert not long, f"docs pages over 800 lines (split them or move logs out): {long}"
