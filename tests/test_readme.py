"""The examples in README.md and docs/ are real: each ```console block that starts with `$ llmcalc ...`
shows lines that appear, in order, in what the command prints today (80 columns). A block with a `…`
line is trimmed: its lines must still appear, in order. A command may be piped into other commands
(`$ llmcalc schema kv | head -12`); the pipeline runs in a shell. Blocks whose command writes a plot
(`--plot`) are not run.

`python tests/test_readme.py` rewrites every untrimmed block of every page with fresh output."""

from __future__ import annotations

import functools
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
BLOCK = re.compile(r"```console\n\$ (llmcalc [^\n]*)\n(.*?)```", re.S)


def pages() -> list[Path]:
    """README.md and every markdown page under docs/."""
    return [README, *sorted((ROOT / "docs").rglob("*.md"))]


@functools.lru_cache(maxsize=None)
def run(command: str) -> str:
    env = dict(os.environ, COLUMNS="80", TERM="dumb")
    if "|" in command:
        # `llmcalc ... | rest`: this checkout's llmcalc, and this interpreter's `python` first on PATH.
        head, _, rest = command.partition("|")
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        args = " ".join(shlex.quote(a) for a in shlex.split(head)[1:])
        line = f"{shlex.quote(sys.executable)} -m llmcalc {args} |{rest}"
        out = subprocess.run(line, shell=True, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    else:
        argv = [sys.executable, "-m", "llmcalc", *shlex.split(command)[1:]]
        out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return out.stdout


def trimmed(shown: str) -> bool:
    return any(x.strip() in ("…", "...") for x in shown.splitlines())


def examples() -> list[tuple[str, str, str]]:
    """(page, command, shown) for every checked block, the page relative to the repository root."""
    found = []
    for page in pages():
        for m in BLOCK.finditer(page.read_text(encoding="utf-8")):
            if "--plot" not in m[1]:
                found.append((page.relative_to(ROOT).as_posix(), m[1], m[2]))
    return found


def is_subsequence(lines: list[str], of: list[str]) -> bool:
    it = iter(of)
    return all(any(line == x for x in it) for line in lines)


@pytest.mark.parametrize("page, command, shown", examples(), ids=[f"{p}: {c}" for p, c, _ in examples()])
def test_example_is_current(page, command, shown, shared):
    if "validate" in command or "calibrate" in command:
        pytest.importorskip("torch")
    for folder in re.findall(r"\.\./shared/([\w-]+)/", command):  # a config from a public repository: ../shared/
        shared(folder)
    real = [x.rstrip() for x in run(command).splitlines()]
    lines = [x.rstrip() for x in shown.splitlines() if x.strip() not in ("…", "...")]
    assert is_subsequence(lines, real), f"{page}: the block for `{command}` is stale: run python tests/test_readme.py"


def test_pages_have_examples():
    names = {p for p, _, _ in examples()}
    assert "README.md" in names
    assert any(p.startswith("docs/commands/") for p in names)


if __name__ == "__main__":
    for page in pages():
        text = page.read_text(encoding="utf-8")

        def fresh(m: re.Match) -> str:
            if "--plot" in m[1] or trimmed(m[2]):
                return m[0]
            return f"```console\n$ {m[1]}\n{run(m[1])}```"

        new = BLOCK.sub(fresh, text)
        if new != text:
            page.write_text(new, encoding="utf-8")
            print(f"refreshed {page.relative_to(ROOT)}")
