"""Help pages a person reads in an 80-column terminal: every command's `--help` fits in 80 lines, its option
descriptions keep a readable column, and a default is never split over two lines."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from llmcalc.cli import COMMANDS

ROOT = Path(__file__).parents[1]


@functools.lru_cache(maxsize=None)
def help_page(*args: str) -> list[str]:
    env = dict(os.environ, COLUMNS="80", TERM="dumb")
    out = subprocess.run([sys.executable, "-m", "llmcalc", *args, "--help"], capture_output=True, text=True, env=env,
                         timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def option_rows(lines: list[str]) -> list[str]:
    """The first line of each option in the options panels: `│ --name ...`."""
    return [x for x in lines if x.startswith("│ -")]


def description_column(row: str) -> int:
    """Where an option row's description starts: after the last run of two or more spaces before the panel's
    right border (a description holds single spaces only)."""
    gaps = list(re.finditer(r" {2,}", row.rstrip("│ ")))
    return gaps[-1].end() if gaps else 0


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_fits_80_lines_of_80_columns(command):
    lines = help_page(*([command] if command else []))
    assert len(lines) <= 80, f"`{command} --help` is {len(lines)} lines"
    assert all(len(x) <= 80 for x in lines)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_descriptions_are_at_least_30_columns_wide(command):
    """No panel's description column starts past column 50 (a long metavar such as `calibrated|roofline` once
    squeezed it to 25 columns), and no option's name is cut short to make room."""
    rows = option_rows(help_page(command))
    assert rows
    late = {row.split()[1]: description_column(row) for row in rows if description_column(row) > 50}
    assert late == {}
    assert not [row for row in rows if row.split()[1].endswith("…")]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_default_is_never_split(command):
    """`[default: 256]` ends its option's description on one line, not on a line of its own split as
    `[default:` / `256]`."""
    lines = help_page(command)
    assert not [x for x in lines if re.search(r"\[default:[^\]]*$", x.rstrip("│ "))]


def test_a_default_shares_the_description_line():
    """A short description and its default are one line (typer gave the default a line of its own)."""
    lines = help_page("latency")
    assert any(re.search(r"--pp .*Pipeline-parallel stages\. \[default: 1\]", x) for x in lines)


def test_advanced_options_come_last_and_choices_are_listed():
    lines = help_page("latency")
    panels = [m[1] for x in lines if (m := re.match(r"╭─ (.+?) ─", x))]
    assert panels[-1] == "Advanced"
    row = next(x for x in lines if x.startswith("│ --time-model"))
    assert "MODEL" in row and "calibrated|roofline" not in row
    assert "calibrated or roofline" in " ".join(lines)
