"""KV cache against a published worked example (Llama-2-7B, 64 × 32k) and DeepSeek-V2's Table 1."""

from __future__ import annotations

import csv
import io

import pytest

from llmcalc.costs.kv import kv_cache
from llmcalc.inputs.presets import load_preset
from llmcalc.workload import Workload


def test_llama2_7b_64x32k_worked_example(cli_json):
    out = cli_json("kv", "--preset", "llama2-7b", "--batch", "64", "--seq", "32768")
    assert out["total_bytes"] == 1_099_511_627_776 == 2**40  # 1 TiB, 1.10 TB
    assert out["bytes_per_token"] == 524_288
    (row,) = out["per_layer"]
    assert row["bytes_per_layer"] == 34_359_738_368  # the "34.3 GB" of the article "Transformer-based LLM": one layer only
    assert row["layers"] == 32


def test_table_shows_bytes_gb_gib_and_the_per_layer_figure(cli):
    r = cli("kv", "--preset", "llama2-7b", "--batch", "64", "--seq", "32768")
    assert r.returncode == 0
    for text in ("1,099,511,627,776 bytes", "1.10 TB", "1.00 TiB", "34.36 GB", "32 layers"):
        assert text in r.stdout


# DeepSeek-V2 Table 1: KV elements per token = MHA 2·n_h·d_h·l, GQA 2·n_g·d_h·l, MQA 2·d_h·l, MLA (d_c + d_R)·l.
TABLE_1 = {
    "llama2-7b": 2 * 32 * 128 * 32,  # MHA
    "llama2-70b": 2 * 8 * 128 * 80,  # GQA, 8 groups
    "falcon-7b": 2 * 64 * 32,  # MQA
    "deepseek-v2": (512 + 64) * 60,  # MLA, d_c = 512, d_R = 64
    "deepseek-v3": (512 + 64) * 61,
}


@pytest.mark.parametrize("name", sorted(TABLE_1))
def test_deepseek_v2_table_1_elements_per_token(name):
    assert kv_cache(load_preset(name), Workload(batch=1, seq=1, kv_dtype="bf16")).bytes_per_token == 2 * TABLE_1[name]


def test_mla_is_about_4_5_head_dims_per_layer():
    """Table 1: MLA's cache equals GQA with 2.25 groups, (d_c + d_R) = 4.5·d_h for d_h = 128."""
    a = load_preset("deepseek-v2").attention
    assert a.kv_elements() * 2 == 9 * a.qk_nope_head_dim


def test_sliding_window_keeps_at_most_the_window():
    """Between steps a window-W layer holds the last W − 1 tokens; the next one makes W keys."""
    spec = load_preset("mistral-7b")  # every layer slides over 4096
    short, at, long = (kv_cache(spec, Workload(batch=2, seq=s)).total_bytes for s in (1000, 4096, 100_000))
    assert short == 2 * 1000 * 2 * 8 * 128 * 32 * 2
    assert long == at == 2 * 4095 * 2 * 8 * 128 * 32 * 2


def test_hybrid_layers_are_split():
    r = kv_cache(load_preset("gemma2-9b"), Workload(batch=1, seq=8192))
    rows = {row.layer_type: row for row in r.per_layer}
    assert rows["full"].tokens_cached == 8192 and rows["sliding 4096"].tokens_cached == 4095
    assert rows["full"].layers == rows["sliding 4096"].layers == 21


@pytest.mark.parametrize("dtype, bits", [("fp32", 32), ("fp16", 16), ("fp8", 8), ("int8", 8), ("int4", 4)])
def test_dtypes(dtype, bits):
    r = kv_cache(load_preset("llama3-8b"), Workload(batch=3, seq=1000, kv_dtype=dtype))
    assert r.total_bytes == 3 * 1000 * 2 * 8 * 128 * 32 * bits // 8


def test_exact_ints_for_huge_contexts():
    r = kv_cache(load_preset("llama3.1-405b"), Workload(batch=1024, seq=10_000_000, kv_dtype="fp32"))
    assert r.total_bytes == 1024 * 10_000_000 * 2 * 8 * 128 * 126 * 4
    assert isinstance(r.total_bytes, int)


@pytest.mark.parametrize("preset", ["llama2-7b", "gemma2-9b"])
def test_csv_ends_with_the_total(cli, cli_json, preset):
    """The CSV's per-layer-type rows are followed by a summary row carrying the total, as the JSON has it."""
    args = ("kv", "-p", preset, "--batch", "8", "--seq", "4096")
    out = cli_json(*args)
    *rows, summary = csv.DictReader(io.StringIO(cli(*args, "-f", "csv").stdout))
    assert [x["row"] for x in rows] == ["item"] * len(out["per_layer"]) and summary["row"] == "summary"
    assert int(summary["total_bytes"]) == out["total_bytes"] == sum(int(x["bytes"]) for x in rows)
    assert int(summary["bytes_per_token"]) == out["bytes_per_token"] and summary["layer_type"] == ""
