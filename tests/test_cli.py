"""The CLI as a user runs it: formats, model sources, and the JSON interface scripts rely on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from conftest import FIXTURES


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
    assert {"llama2-7b", "deepseek-v3", "seed-decoder", "gpt3-175b", "qwen3-30b-a3b"} <= names
    assert all(type(r["total"]) is int and r["active"] <= r["total"] for r in rows)


def test_user_config_yaml(cli_json, tmp_path: Path):
    spec = yaml.safe_load((Path(__file__).parents[1] / "llmcalc/presets/llama2-7b.yaml").read_text())
    spec["name"] = "my-model"
    spec["attention"]["kv_heads"] = 8
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = cli_json("params", "--config", str(path))
    assert out["model"] == "my-model"
    # 24 fewer kv heads × 128 × 4096 × (k and v) × 32 layers
    assert out["total"] == 6_738_415_616 - 24 * 128 * 4096 * 2 * 32


def test_hf_config_file_and_folder(cli_json):
    folder = FIXTURES / "hf" / "qwen2.5-7b"
    assert cli_json("params", "--hf-config", str(folder))["total"] == 7_615_616_512
    assert cli_json("params", "--hf-config", str(folder / "config.json"))["total"] == 7_615_616_512


def test_nested_text_config(cli_json):
    out = cli_json("params", "--hf-config", str(FIXTURES / "hf" / "gemma3-4b"))
    assert out["total"] == 3_880_263_168  # transformers' Gemma3ForCausalLM on the same text_config


def test_python_dash_m_and_console_script_agree():
    a = subprocess.run([sys.executable, "-m", "llmcalc", "params", "-p", "gpt2", "-f", "json"], capture_output=True)
    b = subprocess.run(["llmcalc", "params", "-p", "gpt2", "-f", "json"], capture_output=True)
    assert a.returncode == b.returncode == 0
    assert json.loads(a.stdout) == json.loads(b.stdout)
