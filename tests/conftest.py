"""Shared helpers: run the CLI as a user would (a separate process) and read its output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "llmcalc", *args], capture_output=True, text=True, cwd=cwd, timeout=60
    )


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def cli_json():
    def call(*args: str):
        r = run_cli(*args, "--format", "json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    return call
