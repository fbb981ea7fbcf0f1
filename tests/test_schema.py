"""Every command's JSON output validates against the schema `llmcalc schema` publishes for it, and
every format renders the same rows."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import jsonschema
import pytest

from llmcalc.reports.schema import COMMAND_REPORTS

ARGS = {
    "params": ["--preset", "deepseek-v3"],
    "kv": ["--preset", "gemma2-9b", "--batch", "2", "--seq", "8192"],
    "flops": ["--preset", "mixtral-8x7b", "--gen", "4"],
    "memory": ["--preset", "llama2-7b", "--train"],
    "gpus": [],
    "latency": ["--preset", "qwen3-30b-a3b", "--gpu", "h100-sxm"],
    "fit": ["--preset", "llama3-8b", "--gpu", "a100-80gb"],
    "presets": [],
    "compare": ["gqa", "mla", "--gpu", "h100-sxm"],
    "validate": ["--preset", "gpt2", "--seq", "16", "--batch", "1"],
    "explain": ["kv", "--preset", "gemma2-9b", "--batch", "2", "--seq", "8192"],
    "sweep": ["--preset", "llama2-7b", "--preset", "gemma2-9b", "--seq", "1k..4k", "--batch", "1,8"],
    "moe": ["--preset", "switch-base-8-decoder", "--batch", "8", "--seq", "512"],
    "train": ["--preset", "llama2-7b", "--gpu", "a100-80gb", "--gpus", "8", "--batch", "64", "--pp", "2", "--auto"],
    "mfu": ["--preset", "llama2-7b", "--batch", "8", "--seq", "2048", "--tokens-per-s", "20000", "--gpus", "8",
            "--gpu", "h100-sxm", "--recompute", "selective"],
    "serve": ["--preset", "llama3-8b", "--gpu", "h100-sxm", "--rate", "10", "--requests", "50"],
    "measured": [str(Path(__file__).parent / "fixtures" / "benchmarks" / "vllm_bench_serve.json"), "--gpu", "h100-sxm",
                 "--requests", "20"],
    "plan": ["--preset", "llama3-8b", "--gpu", "h100-sxm", "--max-gpus", "2", "--rate", "5", "--slo-tpot", "0.05",
             "--top", "2", "--emit", "vllm"],
    "scale": ["--flops", "1e21", "--gpu", "h100-sxm"],
    "run": [str(Path(__file__).parents[1] / "docs" / "examples" / "scenarios.yaml")],
}


def test_every_command_has_arguments_here():
    assert set(ARGS) == set(COMMAND_REPORTS)


@pytest.mark.parametrize("command", sorted(COMMAND_REPORTS))
def test_json_validates_against_published_schema(cli, command):
    if command == "validate":
        pytest.importorskip("torch")
    schema = json.loads(cli("schema", command).stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    r = cli(command, *ARGS[command], "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    jsonschema.validate(out, schema)
    # the schema has teeth: a count turned into text fails it
    first = out[0] if isinstance(out, list) else out
    field = next(k for k, v in first.items() if isinstance(v, int) and not isinstance(v, bool))
    broken = first | {field: str(first[field])}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate([broken] if isinstance(out, list) else broken, schema)


def test_schema_lists_all_commands(cli):
    out = json.loads(cli("schema").stdout)
    assert set(out) == set(COMMAND_REPORTS)


@pytest.mark.parametrize("command", ["params", "kv", "flops", "memory", "compare", "presets", "sweep", "explain"])
def test_csv_rows_match_json_rows(cli, cli_json, command):
    """CSV carries the same rows as the JSON's main list (or the list itself), with exact ints."""
    out = cli_json(command, *ARGS[command])
    rows = out if isinstance(out, list) else next(v for v in out.values() if isinstance(v, list) and v
                                                  and isinstance(v[0], dict))
    r = cli(command, *ARGS[command], "--format", "csv")
    assert r.returncode == 0, r.stderr
    table = [x for x in csv.DictReader(io.StringIO(r.stdout)) if x["row"] == "item"]
    assert len(table) == len(rows)
    for got, want in zip(table, rows):
        for k, v in want.items():
            if isinstance(v, int) and not isinstance(v, bool):
                assert int(got[k]) == v


def _cell(value) -> str:
    """A JSON scalar as csv writes it."""
    return "" if value is None else str(value)


@pytest.mark.parametrize("command", sorted(COMMAND_REPORTS))
def test_csv_marks_items_and_ends_with_the_summary(cli, cli_json, command):
    """Every CSV leads with a `row` column: `item` per table row, then (a report, not a list of them) one
    `summary` row carrying each of the report's scalar fields as the JSON has it and its mappings as outer.inner."""
    if command == "validate":
        pytest.importorskip("torch")
    out = cli_json(command, *ARGS[command])
    r = cli(command, *ARGS[command], "--format", "csv")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("row,")
    table = list(csv.DictReader(io.StringIO(r.stdout)))
    if isinstance(out, list):
        assert [x["row"] for x in table] == ["item"] * len(out)
        return
    lists = [v for v in out.values() if isinstance(v, list) and v and isinstance(v[0], dict)]
    items = len(lists[0]) if lists else 0
    assert [x["row"] for x in table] == ["item"] * items + ["summary"]
    summary = table[-1]
    for k, v in out.items():
        if isinstance(v, dict):
            for kk, vv in v.items():
                if not isinstance(vv, (dict, list)):
                    assert summary[f"{k}.{kk}"] == _cell(vv), (k, kk)
        elif not isinstance(v, list) and k != "formula":
            assert summary[k] == _cell(v), k


def test_units_choose_the_byte_labels(cli):
    both = cli("kv", "--preset", "llama2-7b", "--batch", "64", "--seq", "32768").stdout
    si = cli("kv", "--preset", "llama2-7b", "--batch", "64", "--seq", "32768", "--units", "si").stdout
    iec = cli("kv", "--preset", "llama2-7b", "--batch", "64", "--seq", "32768", "--units", "iec").stdout
    assert "1.10 TB" in both and "1.00 TiB" in both
    assert "1.10 TB" in si and "TiB" not in si and "GiB" not in si
    assert "1.00 TiB" in iec and " TB" not in iec and " GB" not in iec


def test_docs_page_is_current():
    from schema_docs import PAGE, render

    assert PAGE.read_text(encoding="utf-8") == render(), "docs/schemas.md is stale: run python tests/schema_docs.py"
