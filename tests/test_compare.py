"""`llmcalc compare`: attention variants against DeepSeek-V2's Table 1 and hand counts, models side by
side against the plain commands."""

from __future__ import annotations

import pytest

# Llama-2-7B as published: d = 4096, 32 layers, 32 heads of 128 (Touvron et al. 2023, Table 1 / config).
D, L, H, DH = 4096, 32, 32, 128


@pytest.fixture(scope="module")
def llama_variants(request):
    import json

    from conftest import run_cli

    r = run_cli("compare", "mha", "gqa", "mqa", "mla", "--preset", "llama2-7b", "--batch", "4", "--seq", "8192",
                "--format", "json")
    assert r.returncode == 0, r.stderr
    return {row["name"]: row for row in json.loads(r.stdout)["rows"]}


def test_kv_per_token_is_deepseek_v2_table_1(llama_variants):
    """MHA 2·n_h·d_h·l, GQA 2·n_g·d_h·l, MQA 2·d_h·l, MLA (d_c + d_r)·l with d_c = 4·d_h, d_r = d_h/2."""
    expected = {"mha": 2 * H * DH * L, "gqa": 2 * 8 * DH * L, "mqa": 2 * DH * L, "mla": (4 * DH + DH // 2) * L}
    for name, elements in expected.items():
        row = llama_variants[name]
        assert row["kv_elements_per_token"] == elements
        assert row["kv_bytes_per_token"] == 2 * elements  # bf16
        assert row["kv_cache_bytes"] == 4 * 8192 * 2 * elements
        assert row["ratios"]["kv_cache_bytes"] == pytest.approx(elements / expected["mha"])
    # Table 1's "≈ 9/2·d_h·l" for MLA: it equals GQA with 2.25 groups
    assert llama_variants["mla"]["kv_elements_per_token"] * 2 == 9 * DH * L


def test_attention_params_by_hand(llama_variants):
    assert llama_variants["mha"]["attention_params"] == 4 * D * D * L
    assert llama_variants["gqa"]["attention_params"] == (2 * D * D + 2 * D * 8 * DH) * L
    assert llama_variants["mqa"]["attention_params"] == (2 * D * D + 2 * D * DH) * L
    d_c, d_r = 4 * DH, DH // 2
    mla = D * H * (DH + d_r) + D * (d_c + d_r) + d_c + d_c * H * (DH + DH) + H * DH * D
    assert llama_variants["mla"]["attention_params"] == mla * L
    # swapping attention leaves everything else: total − attention is the same for every variant
    rest = {r["total_params"] - r["attention_params"] for r in llama_variants.values()}
    assert len(rest) == 1
    assert llama_variants["mha"]["total_params"] == 6_738_415_616  # the published Llama-2-7B count


def test_variant_figures_equal_the_plain_commands(llama_variants, cli_json):
    mha = llama_variants["mha"]
    args = ("--preset", "llama2-7b", "--batch", "4", "--seq", "8192")
    fl = cli_json("flops", *args)
    assert (mha["prefill_flops"], mha["decode_flops"]) == (fl["prefill_flops"], fl["decode_flops"])
    assert mha["memory_bytes"] == cli_json("memory", *args)["total_bytes"]
    lat = cli_json("latency", *args, "--gpu", "h100-sxm", "--gen", "2")
    assert mha["decode_bytes"] == next(p["bytes"] for p in lat["phases"] if p["phase"] == "decode first")


def test_deepseek_v2_keeps_its_own_mla(cli_json):
    out = cli_json("compare", "mla", "mqa", "--preset", "deepseek-v2")
    rows = {r["name"]: r for r in out["rows"]}
    assert list(rows) == ["mha", "mla", "mqa"]  # MHA always first: the reference
    # DeepSeek-V2: 60 layers, 128 heads, d_h = 128, d_c = 512, d_r = 64 (Table 1 and its config)
    assert rows["mla"]["kv_elements_per_token"] == (512 + 64) * 60
    assert rows["mha"]["kv_elements_per_token"] == 2 * 128 * 128 * 60
    assert rows["mla"]["total_params"] == cli_json("params", "--preset", "deepseek-v2")["total"]


def test_swa_caps_the_cache(cli_json):
    out = cli_json("compare", "swa", "--window", "1024", "--seq", "8192")
    rows = {r["name"]: r for r in out["rows"]}
    assert rows["swa"]["kv_cache_bytes"] == 2 * H * DH * L * 2 * 1023  # window − 1 tokens kept
    assert rows["swa"]["total_params"] == rows["mha"]["total_params"]


def test_models_side_by_side(cli_json):
    out = cli_json("compare", "-p", "llama2-7b", "-p", "mixtral-8x7b", "--gpu", "h100-sxm", "--seq", "2048",
                   "--gen", "16", "--batch", "2")
    assert out["mode"] == "models" and out["reference"] == "llama2-7b"
    for row in out["rows"]:
        args = ("--preset", row["model"], "--batch", "2", "--seq", "2048")
        p = cli_json("params", "--preset", row["model"])
        assert (row["total_params"], row["active_params"]) == (p["total"], p["active"])
        assert row["kv_cache_bytes"] == cli_json("kv", *args)["total_bytes"]
    lat = cli_json("latency", "--preset", "llama2-7b", "--batch", "2", "--seq", "2048", "--gpu", "h100-sxm",
                   "--gen", "16")
    assert (out["rows"][0]["ttft_s"], out["rows"][0]["tpot_s"]) == (lat["ttft_s"], lat["tpot_s"])
    mixtral = out["rows"][1]
    # 93.4 GB of bf16 weights cannot sit on one 80 GiB GPU: no latency, and a note says why
    assert mixtral["fits"] is False and mixtral["ttft_s"] is None
    assert any("mixtral-8x7b" in n and "weights" in n for n in out["notes"])
    assert mixtral["ratios"]["total_params"] == pytest.approx(46_702_792_704 / 6_738_415_616)


@pytest.mark.parametrize("args, needle", [
    (("compare", "foo"), "foo"),
    (("compare", "gqa", "--groups", "5"), "--groups"),
    (("compare", "gqa", "-p", "llama2-7b", "-p", "gpt2"), "not both"),
    (("compare", "-p", "gpt2", "-p", "gpt2"), "twice"),
    (("compare", "--seq", "0"), "--seq"),
    # a layout that divides none of the rows exited 0, each row with a note; without a GPU it was dropped unread
    (("compare", "--gpu", "h100-sxm", "--tp", "3", "gqa", "mla"), "--tp: 3 does not divide the 32 attention heads"),
    (("compare", "-p", "mixtral-8x7b", "-p", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--ep", "3"), "--ep: 3 must divide"),
    (("compare", "--tp", "2", "gqa", "mla"), "--tp splits the time over GPUs; give --gpu"),
])
def test_bad_input(cli, args, needle):
    r = cli(*args)
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_models_on_a_parallel_layout(cli_json):
    """--tp spreads the latency rows over GPUs exactly as `llmcalc latency --tp` does."""
    out = cli_json("compare", "-p", "llama2-7b", "-p", "mixtral-8x7b", "--gpu", "h100-sxm", "--tp", "2",
                   "--seq", "2048", "--gen", "16", "--batch", "2")
    for row in out["rows"]:
        lat = cli_json("latency", "--preset", row["model"], "--batch", "2", "--seq", "2048", "--gpu", "h100-sxm",
                       "--gen", "16", "--tp", "2")
        assert (row["ttft_s"], row["tpot_s"], row["fits"]) == (lat["ttft_s"], lat["tpot_s"], lat["fits"])
    assert any("2 × h100-sxm (tp 2" in n for n in out["notes"])
    # a layout that divides one model and not another: the other's row says so, the run goes on
    out = cli_json("compare", "-p", "llama2-7b", "-p", "gpt2", "--gpu", "h100-sxm", "--tp", "8")
    assert [r["fits"] for r in out["rows"]] == [True, False]
    assert any(n.startswith("gpt2: no latency") and "12 attention heads" in n for n in out["notes"])


def test_models_come_from_hugging_face_configs_too(hf_fixture, cli_json):
    """A config.json compares as the preset built from it does."""
    by_hf = cli_json("compare", "--hf-config", str(hf_fixture("mistral-7b")), "--hf-config",
                     str(hf_fixture("llama3-8b")))
    by_preset = cli_json("compare", "-p", "mistral-7b", "-p", "llama3-8b")
    assert by_hf["rows"] == by_preset["rows"]
