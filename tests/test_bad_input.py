"""Every class of bad input: one line on stderr naming the field and the fix, exit 2, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

PRESET = Path(__file__).parents[1] / "llmcalc/presets/llama2-7b.yaml"


def spec_with(**changes) -> dict:
    spec = yaml.safe_load(PRESET.read_text())
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = spec
        for p in parents:
            node = node[p]
        if value is DELETE:
            del node[leaf]
        else:
            node[leaf] = value
    return spec


DELETE = object()


def assert_one_line_error(r, *needles: str) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert r.stdout == ""
    return lines[0]


def test_unknown_preset_lists_names_and_suggests(cli):
    line = assert_one_line_error(cli("params", "--preset", "lama2-7b"), "unknown preset", "llama2-7b", "deepseek-v3")
    assert "did you mean 'llama2-7b'" in line


def test_no_model_or_two_models(cli):
    assert_one_line_error(cli("params"), "--preset")
    assert_one_line_error(cli("params", "--preset", "gpt2", "--config", "x.yaml"), "exactly one")


def test_unknown_option(cli):
    assert_one_line_error(cli("params", "--preset", "gpt2", "--bogus"), "--bogus")


def test_bad_format(cli):
    assert_one_line_error(cli("params", "--preset", "gpt2", "--format", "xml"), "xml")


@pytest.mark.parametrize(
    "changes, needles",
    [
        ({"attention__kv_heads": 5}, ["attention.kv_heads", "divisor"]),
        ({"d_model": 0}, ["d_model", "positive"]),
        ({"n_layers": -3}, ["n_layers"]),
        ({"n_layers": 10**9}, ["n_layers", "smaller"]),
        ({"attention__heads": 0}, ["attention.heads"]),
        ({"vocab_size": "many"}, ["vocab_size", "whole number"]),
        ({"vocab_size": 32000.5}, ["vocab_size", "whole number"]),
        ({"bogus_field": 1}, ["bogus_field", "remove it"]),
        ({"attention__bogus": 1}, ["attention.bogus"]),
        ({"vocab_size": DELETE}, ["vocab_size", "add it"]),
        ({"attention__kind": "flash"}, ["attention", "gqa", "mla"]),
        ({"norm__kind": "batchnorm"}, ["norm.kind", "rmsnorm"]),
        ({"sliding_window": 0}, ["sliding_window"]),
        ({"layer_pattern": ["sliding", "full"]}, ["sliding_window"]),
        ({"sliding_window": 4096}, ["layer_pattern"]),
        ({"norm__bias": True}, ["norm.bias", "layernorm"]),
        ({"tie_embeddings": "maybe"}, ["tie_embeddings", "true or false"]),
    ],
)
def test_invalid_spec_fields(cli, tmp_path: Path, changes, needles):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec_with(**changes)))
    before = path.read_bytes()
    assert_one_line_error(cli("params", "--config", str(path)), str(path), *needles)
    assert path.read_bytes() == before  # nothing the user wrote is touched


def test_moe_top_k_above_experts(cli, tmp_path: Path):
    spec = yaml.safe_load((PRESET.parent / "mixtral-8x7b.yaml").read_text())
    spec["ffn"]["top_k"] = 9
    path = tmp_path / "moe.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert_one_line_error(cli("params", "--config", str(path)), "ffn.top_k", "at most experts")


@pytest.mark.parametrize(
    "text, needles",
    [
        ("name: x\n  bad: [indent\n", ["malformed YAML", "line"]),
        ("- just\n- a list\n", ["expected a mapping"]),
        ("", ["expected a mapping"]),
        ("!!python/object/apply:os.system ['echo pwned']\n", ["tag refused"]),
        ("x: !!python/name:os.system\n", ["tag refused"]),
    ],
)
def test_malformed_or_hostile_yaml(cli, tmp_path: Path, text, needles):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert_one_line_error(cli("params", "--config", str(path)), *needles)


def test_missing_file_and_folder(cli, tmp_path: Path):
    assert_one_line_error(cli("params", "--config", str(tmp_path / "nope.yaml")), "no such file")
    assert_one_line_error(cli("params", "--config", str(tmp_path)), "folder")
    assert_one_line_error(cli("params", "--hf-config", str(tmp_path)), "no config.json")
    assert_one_line_error(cli("params", "--hf-config", str(tmp_path / "config.json")), "no such file")


def test_binary_file(cli, tmp_path: Path):
    path = tmp_path / "weights.bin"
    path.write_bytes(bytes(range(256)) * 4)
    assert_one_line_error(cli("params", "--config", str(path)), "cannot read")


@pytest.mark.parametrize(
    "config, needles",
    [
        ({"model_type": "bert"}, ["'bert' is not supported", "llama", "deepseek_v3"]),
        ({"hidden_size": 4096}, ["model_type None is not supported"]),
        ([1, 2], ["expected a JSON object"]),
        ({"model_type": "llama", "num_attention_heads": 7}, ["divisible", "head_dim"]),
        ({"model_type": "llama", "num_key_value_heads": 5}, ["kv_heads"]),
        ({"model_type": "llama", "hidden_act": "tanh"}, ["activation 'tanh'"]),
        ({"model_type": "llama", "num_hidden_layers": 0}, ["num_hidden_layers"]),
        ({"model_type": "mixtral", "num_experts_per_tok": 9}, ["num_experts_per_tok"]),
    ],
)
def test_bad_hf_config(cli, tmp_path: Path, config, needles):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert_one_line_error(cli("params", "--hf-config", str(path)), *needles)


def test_malformed_json(cli, tmp_path: Path):
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "llama",')
    assert_one_line_error(cli("params", "--hf-config", str(path)), "malformed JSON", "line 1")


@pytest.mark.parametrize(
    "args, needles",
    [
        (["kv", "-p", "gpt2", "--batch", "0"], ["--batch", "> 0"]),
        (["kv", "-p", "gpt2", "--seq", "-5"], ["--seq"]),
        (["flops", "-p", "gpt2", "--gen", "0"], ["--gen"]),
        (["kv", "-p", "gpt2", "--kv-dtype", "fp12"], ["fp12"]),
        (["memory", "-p", "gpt2", "--weights-dtype", "int3"], ["int3"]),
        (["memory", "-p", "gpt2", "--weights-dtype", "int4", "--group-size", "100"], ["--group-size", "768"]),
        (["memory", "-p", "gpt2", "--train", "--weights-dtype", "int4"], ["--weights-dtype"]),
        (["memory", "-p", "gpt2", "--zero", "4"], ["--zero"]),
        (["flops", "-p", "gpt2", "--attention", "sparse"], ["sparse"]),
        (["kv", "-p", "gpt2", "--batch", "two"], ["--batch"]),
    ],
)
def test_bad_workload(cli, args, needles):
    assert_one_line_error(cli(*args), *needles)


def test_window_larger_than_context_is_fine(cli_json):
    assert cli_json("kv", "-p", "mistral-7b", "--seq", "100")["total_bytes"] == 100 * 2 * 8 * 128 * 32 * 2


@pytest.mark.parametrize(
    "args,needles",
    [
        (["latency", "--preset", "llama2-7b", "--gpu", "h100"], ["--gpu", "unknown GPU", "h100-sxm", "valid GPUs"]),
        (["fit", "--preset", "llama2-7b", "--gpu", "nope"], ["--gpu", "a100-80gb"]),
        (["latency", "--preset", "llama2-7b", "--gpu", "h100-sxm", "--tp", "3"], ["--tp", "32 attention heads"]),
        (["fit", "--preset", "llama2-7b", "--gpu", "h100-sxm", "--pp", "5"], ["--pp", "32 layers"]),
        (["fit", "--preset", "llama3-8b", "--gpu", "h100-sxm", "--tp", "3"], ["--tp"]),
        (["latency", "--preset", "llama2-7b", "--gpu", "h100-sxm", "--gpus", "4", "--tp", "2"], ["--gpus", "tp 2"]),
        (["latency", "--preset", "llama2-7b", "--gpu", "h100-sxm", "--ep", "2", "--tp", "2"], ["--ep", "no experts"]),
        (["latency", "--preset", "mixtral-8x7b", "--gpu", "h100-sxm", "--ep", "3", "--tp", "3"], ["--tp"]),
        (["latency", "--preset", "llama2-7b", "--gpu", "a100-80gb", "--compute-dtype", "fp8"],
         ["--compute-dtype", "no fp8", "bf16"]),
        (["latency", "--preset", "llama2-7b", "--gpu", "h100-sxm", "--batch", "3", "--dp", "2"], ["--batch", "--dp 2"]),
        (["fit", "--preset", "llama2-7b", "--gpu", "h100-sxm", "--reserve", "1.5"], ["--reserve"]),
        (["fit", "--preset", "llama2-7b", "--gpu", "h100-sxm", "--gpus", "0"], ["--gpus", "> 0"]),
        (["latency", "--preset", "llama2-7b", "--gpu", "h100-sxm", "--memory-efficiency", "0"], ["--memory-efficiency"]),
        (["latency", "--preset", "deepseek-v3", "--gpu", "l4"], ["--gpus", "GPUs", "weights"]),
        (["fit", "--preset", "llama3.1-405b", "--gpu", "rtx-4090", "--gpus", "8"], ["--gpus", "at least"]),
    ],
)
def test_bad_layout_or_gpu(cli, args, needles):
    assert_one_line_error(cli(*args), *needles)


@pytest.mark.parametrize(
    "text,needles",
    [
        ("name: x\n", ["gpu file", "description", "add it"]),
        ("- 1\n- 2\n", ["expected a mapping"]),
        ("!!python/object/apply:os.system ['echo hi']\n", ["YAML tag refused"]),
    ],
)
def test_bad_gpu_file(cli, tmp_path: Path, text, needles):
    f = tmp_path / "gpu.yaml"
    f.write_text(text)
    assert_one_line_error(cli("latency", "--preset", "llama2-7b", "--gpu", str(f)), *needles)
    assert f.read_text() == text
