"""Tables as a person sees them at 80 columns: every column shown, no cell cut, names never broken, and
whatever a user or a preset wrote shown literally (rich markup is escaped)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).parents[1]
GPU = ["--gpu", "h100-sxm"]
COMMANDS = [
    ["params", "-p", "deepseek-v3"],
    ["presets"],
    ["presets", "gshard-top2-decoder"],
    ["kv", "-p", "gemma2-9b"],
    ["kv", "--hf-config", "HF_FIXTURE:gemma3-4b"],  # the hf_fixture folder of gemma3-4b
    ["flops", "-p", "mixtral-8x7b", "--gen", "16"],
    ["memory", "-p", "llama2-70b", "--batch", "8", "--seq", "8k", "--weights-dtype", "int4"],
    ["memory", "-p", "llama3-8b", "--batch", "32", "--seq", "8k", "--train", "--zero", "3", "--dp", "8"],
    ["gpus"],
    ["gpus", "mi300x"],
    ["latency", "-p", "deepseek-v3", "--gpus", "8", "--weights-dtype", "fp8", "--gpu", "h200"],
    ["fit", "-p", "mixtral-8x7b", *GPU, "--seq", "32k"],
    ["compare", "gqa", "mla", "mqa", "swa", "dsa", "-p", "llama2-7b"],
    ["compare", "-p", "llama2-7b", "-p", "mistral-7b", "-p", "qwen2.5-7b", *GPU],
    ["explain", "flops", "-p", "deepseek-v3.2-exp"],
    ["explain", "latency", "-p", "mixtral-8x7b", *GPU, "--gpus", "2"],
    ["sweep", "-p", "llama3-8b", "--seq", "1k..32k", "--batch", "1,64", *GPU, "--bars"],
    ["sweep", "-p", "gemma2-9b", "--seq", "4k,8k", "--attention", "mha,gqa,mla,mqa"],
    ["moe", "-p", "mixtral-8x7b"],
    ["flops", "-p", "qwen3-30b-a3b", "--elementwise", "--embedding-matmul"],
    ["scale", "--params", "70B", *GPU, "--gpus", "1024"],
    ["plan", "-p", "llama3-8b", *GPU, "--rate", "5", "--slo-tpot", "0.05", "--max-gpus", "4", "--disaggregated",
     "--requests", "100"],
]


def show(*args: str, columns: int = 80) -> str:
    env = dict(os.environ, COLUMNS=str(columns), TERM="dumb")
    r = subprocess.run([sys.executable, "-m", "llmcalc", *args], capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr
    return r.stdout


def names_in(data) -> set[str]:
    """The identifiers a table must show whole: row names, components, ops, phases, layer types."""
    keys = {"name", "component", "layer_type", "op", "phase", "quantity"}
    out: set[str] = set()
    if isinstance(data, dict):
        for k, v in data.items():
            if k in keys and isinstance(v, str):
                out.update(v.split())
            else:
                out |= names_in(v)
    elif isinstance(data, list):
        for v in data:
            out |= names_in(v)
    return out


@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(a[:2]) for a in COMMANDS])
def test_every_table_fits_80_columns_whole(args, hf_fixture):
    args = [str(hf_fixture(a.partition(":")[2])) if a.startswith("HF_FIXTURE:") else a for a in args]
    text = show(*args)
    if args[0] == "presets" and len(args) > 1:
        assert text.startswith(f"# {args[1]}:")  # a spec document (YAML), not a table
        return
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    cut = [line for line in lines if re.search(r"\S…", line)]  # rich ends a cut cell with …
    assert not cut, cut
    data = json.loads(show(*[a for a in args if a != "--bars"], "-f", "json"))  # bars are the table view's
    words = set(text.split())
    missing = {w for w in names_in(data) if w not in words and w not in text}
    assert not missing, missing  # every name shown, none broken across lines


def test_presets_table_keeps_names_and_borders():
    text = show("presets")
    for name in ("gshard-top2-decoder", "longformer-decoder-example", "deepseek-v3.2-exp"):
        assert f"\n{name} " in text
    assert "─" in text  # a header rule, not a table stacked for want of room


def test_gib_column_is_dropped_before_anything_is_cut():
    wide, narrow = show("kv", "-p", "gemma2-9b", columns=160), show("kv", "-p", "gemma2-9b", columns=60)
    assert "all (GiB)" in wide and "all (GiB)" not in narrow and "GiB columns left out" in narrow


def test_user_text_is_shown_literally(tmp_path: Path):
    spec = yaml.safe_load((ROOT / "presets/llama2-7b.yaml").read_text())
    spec["name"] = "my [bold]model[/bold] [mha] :fire:"
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    for args in (["params"], ["kv"], ["memory"], ["latency", *GPU], ["fit", *GPU], ["sweep", "--seq", "1k"],
                 ["explain", "kv"], ["flops"]):
        out = show(*args, "--config", str(path), columns=200)
        assert "my [bold]model[/bold] [mha] :fire:" in out, (args, out[:300])


def test_sweep_attention_series_keep_their_names():
    out = show("sweep", "-p", "llama2-7b", "--seq", "1k", "--attention", "mha,gqa,mla,mqa")
    for variant in ("mha", "gqa", "mla", "mqa"):
        assert f"llama2-7b [{variant}]: memory" in out


def test_yaml_is_utf8():
    out = show("explain", "kv", "-p", "llama2-7b", "-f", "yaml")
    assert "Σ" in out or "·" in out
    assert "\\u" not in out


UNIT = re.compile(r"(?:[KMGTPE]i?B|[KMBTPE]|ms|µs|ns|s|min|h|days|bytes)\b")


def parted_units(text: str) -> list[tuple[str, str]]:
    """Each place a number ends a line and its unit starts the next: in lines of text, or in a boxed table's
    column (the cell above ends in a digit at the column's border, the one below starts with the unit)."""
    lines = text.splitlines()
    found = []
    for a, b in zip(lines, lines[1:]):
        if re.search(r"\d$", a.rstrip()) and UNIT.match(b.lstrip("│┃ ")):
            found.append((a, b))
        for i in (i for i, c in enumerate(a) if c == "│" and b[i:i + 1] == "│"):
            below = b[b.rfind("│", 0, i) + 1:i].strip()
            if a[:i].rstrip()[-1:].isdigit() and UNIT.match(below):
                found.append((a, b))
    return found


@pytest.mark.parametrize("args", [
    ["compare", "gqa", "mla", "swa", "longformer", *GPU, "--units", "iec"],
    ["kv", "-p", "llama2-7b", "--batch", "64", "--seq", "32768"],
    ["memory", "-p", "llama2-7b", "--weights-dtype", "fp8"],
    ["fit", "-p", "llama3-8b", "--gpu", "l4"],
], ids=lambda a: " ".join(a[:2]))
def test_a_number_keeps_its_unit_on_its_line(args):
    """`1.31` at a line's end and `GiB` on the next: once in compare's columns ('512.00' over 'MiB') and in the
    first line of kv, memory and fit ('(1.10' then 'TB, 1.00 TiB)')."""
    assert parted_units(show(*args)) == []


def test_every_size_of_a_narrow_compare_is_shown_whole():
    from llmcalc.render.text import size

    args = ["compare", "gqa", "mla", "swa", "longformer", "mqa", *GPU, "--units", "iec"]
    text, rows = show(*args), json.loads(show(*args, "-f", "json"))["rows"]
    shown = [size(r[f], "iec") for r in rows for f in ("kv_cache_bytes", "decode_bytes", "memory_bytes")]
    assert all(text.count(s) >= shown.count(s) for s in shown), [s for s in shown if text.count(s) < shown.count(s)]


def test_a_stacked_table_names_each_column_on_one_line():
    """A table too wide for the terminal is stacked, a block per row, each value after its column's header on one
    line: `max seqs`, `headroom`, `tok/s/GPU` (set on two lines as the table's headers)."""
    from llmcalc.render.tables import stacked, table

    t = table("Deployments", ["#", "max\nseqs", "head-\nroom", "tok/s\n/GPU"], [["1", "16", "×1.5", "256"]])
    assert stacked(t) == ["[bold]Deployments[/bold]", "#: 1", "  max seqs: 16", "  headroom: ×1.5",
                          "  tok/s/GPU: 256"]


@pytest.mark.parametrize("env", [{"PYTHONIOENCODING": "ascii"}, {"PYTHONIOENCODING": "latin-1"},
                                 {"LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}])
def test_an_output_that_cannot_write_unicode_gets_escaped_json_and_a_plain_table(env):
    """Under an encoding without Σ, × or ≈ every format was a UnicodeEncodeError traceback (exit 1): JSON and YAML
    now escape them (the same text once parsed), a table writes ? for them, an error line too."""
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "PYTHONUTF8", "LC_ALL", "LANG")}

    def run(*args):
        return subprocess.run([sys.executable, "-m", "llmcalc", *args], capture_output=True, timeout=300,
                              env=base | env)

    utf8 = json.loads(subprocess.run([sys.executable, "-m", "llmcalc", "kv", "-p", "llama3-8b", "-f", "json"],
                                     capture_output=True, text=True, timeout=300, check=True).stdout)
    r = run("kv", "-p", "llama3-8b", "-f", "json")
    assert r.returncode == 0 and json.loads(r.stdout.decode("ascii")) == utf8, r.stderr[-400:]
    r = run("kv", "-p", "llama3-8b", "-f", "yaml")
    assert r.returncode == 0 and yaml.safe_load(r.stdout.decode("ascii"))["formula"] == utf8["formula"], r.stderr
    r = run("kv", "-p", "llama3-8b")
    assert r.returncode == 0 and b"536,870,912 bytes" in r.stdout and b"Traceback" not in r.stderr, r.stderr[-400:]
    r = run("kv", "-p", "llama3-8b", "--batch", "0")
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr


@pytest.mark.parametrize("columns", ["0", "00"])
def test_a_terminal_width_of_zero_is_no_width(columns):
    """COLUMNS=0 made every table a ValueError traceback in rich (a width of 0 divides): it is read as unset."""
    r = subprocess.run([sys.executable, "-m", "llmcalc", "params", "-p", "gpt2"], capture_output=True, text=True,
                       timeout=300, env=os.environ | {"COLUMNS": columns, "LINES": columns})
    assert r.returncode == 0 and "124,439,808" in r.stdout and not r.stderr, r.stderr[-400:]
