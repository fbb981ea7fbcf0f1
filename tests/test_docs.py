"""The docs hold together: every relative link in README.md and docs/**/*.md points to a file that
exists, and every `#anchor` to a heading of that page (GitHub's anchors); every command of the CLI has
its page docs/commands/COMMAND.md, linked from the README, and each page names every option of its
command and no option that no command has."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)


def prose(text: str) -> str:
    """The page without fenced code blocks and code spans, where a `[x](y)` is not a link."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


@functools.lru_cache(maxsize=None)
def anchors(page: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    found = set()
    for m in HEADING.finditer(FENCE.sub("", page.read_text(encoding="utf-8"))):
        base = slug(m[1])
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return frozenset(found)


def broken_links(page: Path) -> list[str]:
    broken = []
    for m in LINK.finditer(prose(page.read_text(encoding="utf-8"))):
        target = m[1]
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / unquote(path)).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and unquote(anchor).lower() not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT).as_posix()}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_links_resolve(page):
    assert broken_links(page) == []


def test_slug_matches_github():
    assert slug("## `llmcalc kv`".lstrip("# ")) == "llmcalc-kv"
    assert slug("FLOPs (`llmcalc/costs/flops.py`)") == "flops-llmcalccostsflopspy"
    assert slug("Efficiency defaults and why") == "efficiency-defaults-and-why"


@functools.lru_cache(maxsize=None)
def cli_help(*args: str) -> str:
    env = dict(os.environ, COLUMNS="250", TERM="dumb")
    out = subprocess.run([sys.executable, "-m", "llmcalc", *args, "--help"], capture_output=True, text=True,
                         env=env, timeout=900, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return out.stdout


def commands() -> list[str]:
    """The commands `llmcalc --help` lists, in its order."""
    text = cli_help()
    panel = text[text.index("Commands"):]
    return re.findall(r"^│ ([a-z][a-z-]*) {2,}", panel, re.M)


def options(command: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", cli_help(command))) - {"--help"}


COMMANDS = commands()


def test_commands_found():
    assert {"params", "kv", "flops", "memory", "latency", "fit", "validate", "schema"} <= set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_command_has_its_page(command):
    page = ROOT / "docs" / "commands" / f"{command}.md"
    assert page.is_file(), f"no docs/commands/{command}.md"
    assert f"(docs/commands/{command}.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"({command}.md)" in (ROOT / "docs" / "commands" / "README.md").read_text(encoding="utf-8")


GLOBAL = {"--version", "--install-completion", "--show-completion"}


def named_options(command: str) -> set[str]:
    """The options a command's page names outside its examples, leaving out `llmcalc OTHER ...` spans."""
    text = FENCE.sub("", (ROOT / "docs" / "commands" / f"{command}.md").read_text(encoding="utf-8"))
    text = re.sub(r"`llmcalc (?!" + re.escape(command) + r"\b)[^`]*`", "", text)
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text))


@pytest.mark.parametrize("command", COMMANDS)
def test_command_page_names_its_options(command):
    """Every option of the command is on its page; an option the page names exists (on this command, or
    on another the page points to, such as `--config` on the presets page)."""
    named, has = named_options(command), options(command)
    assert sorted(has - named) == [], f"docs/commands/{command}.md does not name these options"
    known = set().union(*(options(c) for c in COMMANDS)) | GLOBAL
    assert sorted(named - known) == [], f"docs/commands/{command}.md names options no command has"


def test_latency_is_described_by_its_default_time_model():
    """latency runs the GPU's calibrated profile unless told `--time-model roofline`: its summary line
    called it roofline time."""
    index = (ROOT / "docs" / "commands" / "README.md").read_text(encoding="utf-8")
    row = next(x for x in index.splitlines() if x.startswith("| `llmcalc latency` |"))
    page = (ROOT / "docs" / "commands" / "latency.md").read_text(encoding="utf-8").splitlines()[0]
    for text in (row, page):
        assert "roofline time" not in text.lower(), text
    assert "calibrated" in row


def test_every_test_file_is_in_the_tests_index():
    """tests/README.md groups the test files by oracle: a file it does not name cannot be found there."""
    index = (ROOT / "tests" / "README.md").read_text(encoding="utf-8")
    missing = [p.name for p in sorted((ROOT / "tests").glob("test_*.py")) if p.name not in index]
    assert not missing, f"add these to a group of tests/README.md: {missing}"
