"""The linters as tests: ruff and mypy with the settings in pyproject.toml ([tool.ruff],
[tool.mypy]) over the source tree, failing on any finding and printing the findings.

Each skips, saying so, only when its tool is not installed (both are in the ``test`` extra:
``pip install -e '.[test]'``); a tool that runs and reports something fails the test.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUFF_PATHS = ["engine", "spark_udfs", "tests", "bench"]


def _require(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install -e '.[test]' brings it): {module} not run")


def _run(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_ruff():
    _require("ruff")
    r = _run("ruff", "check", "--no-cache", "--output-format", "concise", *RUFF_PATHS, timeout=300)
    assert r.returncode == 0, f"ruff check {' '.join(RUFF_PATHS)} found:\n{r.stdout}{r.stderr}"


def test_mypy():
    _require("mypy")
    # packages and settings come from [tool.mypy]; no incremental cache left in the tree
    r = _run("mypy", "--no-incremental", "--cache-dir", "/dev/null", timeout=900)
    assert r.returncode == 0, f"mypy found:\n{r.stdout}{r.stderr}"
