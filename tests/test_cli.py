"""The CLI as a user runs it: formats, model sources, and the JSON interface scripts rely on."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml


def test_params_json_interface(cli_json):
    out = cli_json("params", "--preset", "mixtral-8x7b")
    for key in ("total", "active", "active_excluding_embedding"):
        assert type(out[key]) is int
    assert (out["total"], out["active"]) == (46_702_792_704, 12_879_925_248)
    assert out["active_excluding_embedding"] == out["active"] - 32000 * 4096
    components = {row["component"] for row in out["breakdown"]}
    assert {"embedding/token", "attention/q", "attention/o", "ffn/router", "ffn/experts", "lm_head"} <= components


def test_params_table_shows_total_breakdown_and_layer_types(cli):
    r = cli("params", "--preset", "deepseek-v3")
    assert r.returncode == 0, r.stderr
    for text in ("671,026,404,352", "attention/kv_up", "ffn/shared_experts", "MTP", "layers", "full attention"):
        assert text in r.stdout


def test_params_yaml(cli):
    r = cli("params", "--preset", "gpt2", "--format", "yaml")
    assert yaml.safe_load(r.stdout)["total"] == 124_439_808


def test_presets_lists_all_with_counts(cli_json):
    rows = cli_json("presets")
    names = {r["name"] for r in rows}
    assert {"llama2-7b", "deepseek-v3", "tiny-decoder-example", "gpt3-175b", "qwen3-30b-a3b"} <= names
    assert all(type(r["total"]) is int and r["active"] <= r["total"] for r in rows)


def test_user_config_yaml(cli_json, tmp_path: Path):
    spec = yaml.safe_load((Path(__file__).parents[1] / "presets/llama2-7b.yaml").read_text())
    spec["name"] = "my-model"
    spec["attention"]["kv_heads"] = 8
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = cli_json("params", "--config", str(path))
    assert out["model"] == "my-model"
    # 24 fewer kv heads × 128 × 4096 × (k and v) × 32 layers
    assert out["total"] == 6_738_415_616 - 24 * 128 * 4096 * 2 * 32


def test_hf_config_file_and_folder(cli_json, hf_fixture):
    folder = hf_fixture("qwen2.5-7b")
    assert cli_json("params", "--hf-config", str(folder))["total"] == 7_615_616_512
    assert cli_json("params", "--hf-config", str(folder / "config.json"))["total"] == 7_615_616_512


def test_nested_text_config(cli_json, hf_fixture):
    out = cli_json("params", "--hf-config", str(hf_fixture("gemma3-4b")))
    # transformers' Gemma3ForCausalLM on the same text_config, and Gemma3ForConditionalGeneration on the whole
    assert out["language"] == 3_880_263_168
    assert out["total"] == 4_300_079_472 == out["language"] + out["vision"]


def test_python_dash_m_and_console_script_agree():
    a = subprocess.run([sys.executable, "-m", "llmcalc", "params", "-p", "gpt2", "-f", "json"], capture_output=True)
    b = subprocess.run(["llmcalc", "params", "-p", "gpt2", "-f", "json"], capture_output=True)
    assert a.returncode == b.returncode == 0
    assert json.loads(a.stdout) == json.loads(b.stdout)


def test_counts_take_k_and_m_suffixes(cli_json):
    """32k = 32,768 (k = 1024, m = 1024²), in either case, wherever a count is taken."""
    plain = cli_json("kv", "-p", "llama3-8b", "--seq", "32768", "--batch", "1024")
    assert cli_json("kv", "-p", "llama3-8b", "--seq", "32k", "--batch", "1K") == plain
    assert cli_json("flops", "-p", "gpt2", "--seq", "1k", "--gen", "1M")["gen"] == 2**20
    assert cli_json("fit", "-p", "llama3-8b", "--gpu", "h100-sxm", "--prefill-chunk", "4k")["activation_bytes"] > 0


def test_a_preset_in_full_is_a_spec_to_edit(cli, cli_json, tmp_path: Path):
    """`presets NAME` prints a spec file (`--config` loads it back to the same model) led by its figures."""
    r = cli("presets", "mixtral-8x7b")
    assert r.returncode == 0 and r.stdout.startswith("# mixtral-8x7b: 46,702,792,704 parameters")
    path = tmp_path / "mine.yaml"
    path.write_text(r.stdout)
    assert cli_json("params", "--config", str(path)) == cli_json("params", "--preset", "mixtral-8x7b")
    data = cli_json("presets", "mixtral-8x7b")
    assert data["kv_bytes_per_token"] == 32 * 2 * 8 * 128 * 2 and data["spec"]["ffn"]["experts"] == 8


def test_presets_list_shape_and_families(cli_json):
    row = next(r for r in cli_json("presets") if r["name"] == "gemma2-9b")
    assert (row["layers"], row["d_model"], row["max_seq_len"], row["sliding_window"]) == (42, 3584, 8192, 4096)
    assert (row["attention_kind"], row["ffn_kind"]) == ("GQA 16/8", "GeGLU")


def test_a_gpu_in_full(cli_json):
    g = cli_json("gpus", "h100-sxm")
    assert round(g["peak_flops"]["bf16"] / 1e12, 1) == 989.4 and round(g["peak_flops"]["fp8"] / 1e12, 1) == 1978.9
    assert g["memory_bytes"] == 80 * 2**30 and g["source"].startswith("https://")


def test_gpu_names_suggest_every_model_of_that_name(cli):
    r = cli("latency", "-p", "llama2-7b", "--gpu", "h100")
    assert r.returncode == 2 and "'h100-pcie' or 'h100-sxm'" in r.stderr


def test_flops_header_names_mla_decode_only_for_mla(cli):
    assert "MLA decode" not in cli("flops", "-p", "llama3-8b").stdout.splitlines()[0]
    assert "MLA decode absorbed" in " ".join(cli("flops", "-p", "deepseek-v2-lite").stdout.splitlines()[:2])


def test_vanishing_probabilities_read_as_about_zero(cli):
    out = cli("moe", "-p", "switch-base-8-decoder", "--batch", "64", "--seq", "2048", "--capacity-factor", "4").stdout
    assert "≈0" in out and not re.search(r"\de-\d", out)


def test_help_fits_80_columns_without_type_tags():
    import os
    env = dict(os.environ, COLUMNS="80", TERM="dumb")
    for args in (["--help"], ["latency", "--help"], ["memory", "-h"], ["sweep", "--help"], ["validate", "--help"]):
        out = subprocess.run([sys.executable, "-m", "llmcalc", *args], capture_output=True, text=True, env=env).stdout
        assert "<bool>" not in out and "<str>" not in out and "list[" not in out, args
        assert all(len(line) <= 80 for line in out.splitlines()), args
    latency = subprocess.run([sys.executable, "-m", "llmcalc", "latency", "--help"], capture_output=True, text=True,
                             env=env).stdout
    for panel in ("Model", "Workload", "Precision", "GPUs and layout", "Output"):
        assert f"─ {panel} ─" in latency
    assert "--install-completion" in subprocess.run([sys.executable, "-m", "llmcalc", "--help"], capture_output=True,
                                                    text=True, env=env).stdout


def test_the_shell_completes_preset_and_gpu_names():
    """Completion knew commands and options, not `--preset lla<TAB>`; every --preset and --gpu option
    now completes the names (the zsh protocol typer speaks, in a subprocess as the shell runs it)."""
    import os

    def complete(words: str) -> str:
        env = os.environ | {"_LLMCALC_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": words}
        code = "import sys; sys.argv[0] = 'llmcalc'; from llmcalc.cli import main; main()"
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                              timeout=900).stdout

    presets = complete("llmcalc kv --preset llama3")
    assert '"llama3-8b"' in presets and '"llama3.1-70b"' in presets and "mixtral" not in presets
    gpus = complete("llmcalc latency --gpu h1")
    assert '"h100-sxm"' in gpus and '"h200"' not in gpus and "a100" not in gpus
    assert '"h200"' in complete("llmcalc plan --gpu h2")


def test_a_large_batch_is_written_with_separators_like_the_context(cli):
    """'131072 × 32,768 tokens': the batch and the context of one phrase in the same style."""
    big = ("-p", "llama2-7b", "--batch", "131072", "--seq", "32768")
    for command in ("kv", "memory", "flops", "explain"):
        args = ("explain", "kv", *big) if command == "explain" else (command, *big)
        out = " ".join(cli(*args, "--units", "si").stdout.split())
        assert "131,072" in out and not re.search(r"(?<![\d·] )131072(?! ·)", out), command
    assert "(2,251.80 TB" in " ".join(cli("kv", *big).stdout.split())
