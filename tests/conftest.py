"""Shared helpers: run the CLI as a user would (a separate process) and read its output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """`llmcalc ARGS` in a process of its own; a run past `timeout` seconds (a hang) fails the test."""
    return subprocess.run(
        [sys.executable, "-m", "llmcalc", *args], capture_output=True, text=True, cwd=cwd, timeout=timeout
    )


def strict_json(text: str):
    """JSON as the standard has it: NaN, Infinity and a number past a float's range (1e999) refused."""
    def refuse(name):
        raise ValueError(f"{name} in the JSON output")

    def finite(text: str) -> float:
        value = float(text)
        if value in (float("inf"), float("-inf")):
            raise ValueError(f"{text} overflows a float")
        return value

    return json.loads(text, parse_constant=refuse, parse_float=finite)


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
