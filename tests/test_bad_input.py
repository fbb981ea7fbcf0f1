"""Every class of bad input: one line on stderr naming the field and the fix, exit 2, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

PRESET = Path(__file__).parents[1] / "presets/llama2-7b.yaml"


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


def test_unknown_preset_suggests_and_points_at_the_list(cli):
    """The nearest names and `llmcalc presets`, not all 49 names (once a 1,400-character line)."""
    line = assert_one_line_error(cli("params", "--preset", "lama2-7b"), "unknown preset", "llmcalc presets")
    assert line.startswith("error: --preset: unknown preset 'lama2-7b'; did you mean 'llama2-7b'")
    assert "deepseek-v3" not in line and len(line) < 200
    assert "did you mean 'qwen3-8b'" in assert_one_line_error(cli("params", "--preset", "qwen3"), "unknown preset")


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
        ({"checkpoint": 3}, ["checkpoint: Input should be a valid dictionary or instance of Checkpoint", "mapping"]),
        ({"checkpoint": {"rotary_buffers": True, "zzz": 1}}, ["checkpoint.zzz", "remove it"]),
        ({"vision": [1]}, ["vision: Input should be a valid dictionary or instance of VisionTower", "mapping"]),
        ({"vision": {"kind": "mosaic"}}, ["vision.kind", "vit, tiled"]),
        ({"vision": {"image_size": 224}}, ["missing fields", "vision.patch_size", "vision.projector"]),
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
        ({"model_type": "xlnet"}, ["'xlnet' is not supported", "llama", "bert"]),
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
        (["memory", "-p", "gpt2", "--weights-dtype", "int4", "--group-size", "0"], ["--group-size", "> 0"]),
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
        (["latency", "--preset", "llama3.1-405b", "--gpu", "rtx-4090", "--gpus", "8"], ["--gpus", "fewest GPUs"]),
    ],
)
def test_bad_layout_or_gpu(cli, args, needles):
    assert_one_line_error(cli(*args), *needles)


@pytest.mark.parametrize(
    "text,needles",
    [
        ("name: x\n", ["gpu file", "missing fields description, source, peak_tflops", "add them"]),
        ("- 1\n- 2\n", ["expected a mapping"]),
        ("!!python/object/apply:os.system ['echo hi']\n", ["YAML tag refused"]),
    ],
)
def test_bad_gpu_file(cli, tmp_path: Path, text, needles):
    f = tmp_path / "gpu.yaml"
    f.write_text(text)
    assert_one_line_error(cli("latency", "--preset", "llama2-7b", "--gpu", str(f)), *needles)
    assert f.read_text() == text


# ---- The catalogue: every class of bad input, run as a user would, in a folder of its own ----------------
#
# Each command runs in a fresh tmp folder (cwd) holding the files it names; the folder's files (names and
# bytes) must be the same after the refused run: nothing written, nothing overwritten, no hang (TIMEOUT).

TIMEOUT = 900  # seconds: a guard against a hang only, generous enough for a busy machine
MIXTRAL = PRESET.parent / "mixtral-8x7b.yaml"


def run_in(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "llmcalc", *args], capture_output=True, text=True, cwd=folder,
                          timeout=TIMEOUT, check=False)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"<dir>" for p in sorted(folder.rglob("*"))}


def refused(folder: Path, args: list[str], needles: list[str], files: dict[str, bytes | str] | None = None) -> str:
    """Write `files` into `folder`, run `args` there: exit 2, one line naming `needles`, nothing written."""
    before = prepare(folder, files)
    line = assert_one_line_error(run_in(folder, *args), *needles)
    assert "Traceback" not in line
    assert snapshot(folder) == before
    return line


def spec_text(**changes) -> str:
    return yaml.safe_dump(spec_with(**changes))


def moe_text(**ffn) -> str:
    spec = yaml.safe_load(MIXTRAL.read_text())
    spec["ffn"] |= ffn
    return yaml.safe_dump(spec)


BOMB = "\n".join(['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
                 + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]) + "\n"
GPU = ["--gpu", "h100-sxm"]

CATALOGUE = {
    # unknown names: the message lists the valid ones and the nearest
    "unknown preset": (["kv", "-p", "llama2-7", "--seq", "8"], ["unknown preset", "did you mean 'llama2-7b'",
                                                                  "llmcalc presets"], None),
    "unknown gpu": (["fit", "-p", "gpt2", "--gpu", "h100sxm"], ["--gpu", "did you mean 'h100-sxm'", "a100-80gb"], None),
    "unknown command": (["parms", "-p", "gpt2"], ["parms", "params", "Commands:", "sweep"], None),
    "unknown command far": (["frobnicate"], ["frobnicate", "Commands:", "explain"], None),
    "unknown explain topic": (["explain", "paramz", "-p", "gpt2"], ["paramz", "params", "latency"], None),
    "unknown compare variant": (["compare", "gqa", "mqa2"], ["mqa2", "mha, gqa, mqa, mla, swa"], None),
    "unknown sweep variant": (["sweep", "-p", "gpt2", "--seq", "1k", "--attention", "gqa,flash"],
                              ["flash", "mha"], None),
    "unknown schema command": (["schema", "kvcache"], ["kvcache", "params", "sweep"], None),
    # malformed YAML and JSON
    "malformed yaml": (["params", "--config", "s.yaml"], ["s.yaml", "malformed YAML", "line 2"],
                       {"s.yaml": "name: x\n  vocab_size: [1,\n"}),
    "malformed json spec": (["params", "--config", "s.json"], ["s.json", "malformed YAML"],
                            {"s.json": '{"name": "x", "vocab_size": 32000,'}),
    "duplicate key": (["params", "--config", "s.yaml"], ["s.yaml", "'n_layers' appears twice", "keep one"],
                      {"s.yaml": spec_text() + "n_layers: 40\n"}),
    "malformed hf json": (["kv", "--hf-config", "m"], ["config.json", "malformed JSON", "line 1"],
                          {"m/config.json": '{"model_type": "llama", "hidden_size": 4096'}),
    # hostile YAML: tags that would build objects, alias bombs, deep nesting, huge files and numbers
    "tag apply": (["params", "--config", "s.yaml"], ["tag refused", "no tags"],
                  {"s.yaml": "!!python/object/apply:os.system ['touch pwned']\n"}),
    "tag name": (["flops", "--config", "s.yaml"], ["tag refused"], {"s.yaml": "name: !!python/name:os.system\n"}),
    "tag in gpu file": (["fit", "-p", "gpt2", "--gpu", "g.yaml"], ["tag refused"],
                        {"g.yaml": "name: !!python/object/new:os.system [touch pwned]\n"}),
    "billion laughs": (["params", "--config", "s.yaml"], ["s.yaml", "100,000 values", "aliases"], {"s.yaml": BOMB}),
    "billion laughs in a field": (["params", "--config", "s.yaml"], ["s.yaml", "aliases"],
                                  {"s.yaml": BOMB + spec_text(layer_pattern=DELETE) + "layer_pattern: *a9\n"}),
    "deep nesting": (["params", "--config", "s.yaml"], ["s.yaml", "nested more than 32 levels"],
                     {"s.yaml": "name: " + "[" * 200_000 + "]" * 200_000 + "\n"}),
    "deep json nesting": (["params", "--hf-config", "config.json"], ["config.json", "nested too deeply"],
                          {"config.json": '{"model_type": "llama", "x": ' + "[" * 200_000 + "]" * 200_000 + "}"}),
    "huge file": (["params", "--config", "s.yaml"], ["s.yaml", "more than 1,048,576", "bytes"],
                  {"s.yaml": spec_text() + "# " + "x" * (3 << 20) + "\n"}),
    "huge hf file": (["params", "--hf-config", "."], ["config.json", "more than 1,048,576"],
                     {"config.json": '{"model_type": "llama", "pad": "' + "x" * (3 << 20) + '"}'}),
    "hf number of 100,000 digits": (["params", "--hf-config", "."], ["config.json", "cannot be read"],
                                    {"config.json": '{"model_type": "llama", "vocab_size": ' + "9" * 100_000 + "}"}),
    "number of 100,000 digits": (["params", "--config", "s.yaml"], ["s.yaml", "cannot be read", "plain numbers"],
                                 {"s.yaml": spec_text(n_layers=0).replace("n_layers: 0", "n_layers: " + "9" * 100_000)}),
    # wrong types
    "string for int": (["kv", "--config", "s.yaml"], ["n_layers", "whole number", "'32'"],
                       {"s.yaml": spec_text(n_layers="32")}),
    "float for int": (["kv", "--config", "s.yaml"], ["attention.head_dim", "whole number"],
                      {"s.yaml": spec_text(attention__head_dim=128.0)}),
    "bool for int": (["kv", "--config", "s.yaml"], ["attention.heads", "whole number", "True"],
                     {"s.yaml": spec_text(attention__heads=True)}),
    "list for mapping": (["params", "--config", "s.yaml"], ["norm", "mapping of fields"],
                         {"s.yaml": spec_text(norm=["rmsnorm"])}),
    "mapping for list": (["params", "--config", "s.yaml"], ["layer_pattern", "give a list"],
                         {"s.yaml": spec_text(layer_pattern={"full": 32})}),
    "hf string for int": (["params", "--hf-config", "."], ["num_attention_heads", '"32"', "whole number"],
                          {"config.json": json.dumps({"model_type": "llama", "num_attention_heads": "32"})}),
    "hf null for int": (["params", "--hf-config", "."], ["hidden_size", "null", "whole number"],
                        {"config.json": json.dumps({"model_type": "llama", "hidden_size": None})}),
    "hf list for string": (["params", "--hf-config", "."], ["hidden_act", "string"],
                           {"config.json": json.dumps({"model_type": "llama", "hidden_act": ["silu"]})}),
    "hf list for model_type": (["params", "--hf-config", "."], ["model_type", "not supported", "llama"],
                               {"config.json": json.dumps({"model_type": ["llama"]})}),
    "option string for int": (["kv", "-p", "gpt2", "--seq", "4kb"], ["--seq", "whole number", "4k"], None),
    # out-of-range and absurd sizes
    "n_layers 10^9": (["params", "--config", "s.yaml"], ["n_layers", "smaller"], {"s.yaml": spec_text(n_layers=10**9)}),
    "heads 0": (["kv", "--config", "s.yaml"], ["attention.heads", "positive"], {"s.yaml": spec_text(attention__heads=0)}),
    "d_model negative": (["params", "--config", "s.yaml"], ["d_model", "positive"],
                         {"s.yaml": spec_text(d_model=-4096)}),
    "vocab 10^15": (["params", "--config", "s.yaml"], ["vocab_size", "smaller"],
                    {"s.yaml": spec_text(vocab_size=10**15)}),
    "hf layers 10^9": (["params", "--hf-config", "."], ["num_hidden_layers", "100,000"],
                       {"config.json": json.dumps({"model_type": "mistral", "num_hidden_layers": 10**9})}),
    "hf heads 0": (["params", "--hf-config", "."], ["num_attention_heads", "> 0"],
                   {"config.json": json.dumps({"model_type": "gpt2", "n_head": 0, "num_attention_heads": 0})}),
    "batch 10^18": (["kv", "-p", "gpt2", "--batch", str(10**18)], ["--batch", "smaller"], None),
    "seq 10^18": (["flops", "-p", "gpt2", "--seq", str(10**18)], ["--seq", "smaller"], None),
    "fit seq 10^18": (["fit", "-p", "gpt2", *GPU, "--seq", str(10**18)], ["--seq", "smaller"], None),
    "gen 10^18": (["latency", "-p", "gpt2", *GPU, "--gen", str(10**18)], ["--gen", "smaller"], None),
    "gpus 10^9": (["latency", "-p", "gpt2", *GPU, "--gpus", str(10**9)], ["--gpus", "smaller"], None),
    "sweep grid over 10,000 points": (["sweep", "-p", "gpt2", "--batch", "1..200:1", "--seq", "1..100:1"],
                                      ["--seq/--batch", "10,000"], None),
    "sweep axis over 10,000 values": (["sweep", "-p", "gpt2", "--seq", "1..1m:1"], ["--seq", "10,000", "step"], None),
    "sweep rows over 40,000": (["sweep", "-p", "gpt2", "-p", "mistral-7b", "-p", "llama2-7b", "--attention", "mha,gqa",
                                "--seq", "1..10000:2", "--batch", "1,2"], ["6 series", "rows", "40,000"], None),
    "sweep seq 1..10^18": (["sweep", "-p", "gpt2", "--seq", f"1..{10**18}"], ["--seq", "too large"], None),
    "validate seq beyond learned positions": (["validate", "-p", "gpt2", "--seq", "100000"],
                                              ["--seq", "learned positions", "1023"], None),
    "validate absurd size": (["validate", "-p", "llama2-7b", "--seq", str(10**11)], ["--batch/--seq", "smaller"],
                             None),
    "validate too many layers": (["validate", "--config", "s.yaml"], ["--layers", "256"],
                                 {"s.yaml": spec_text(n_layers=5000)}),
    # inconsistent fields
    "heads not divisible by kv_heads": (["kv", "--config", "s.yaml"], ["attention.kv_heads", "divisor"],
                                        {"s.yaml": spec_text(attention__kv_heads=6)}),
    "top_k above experts": (["flops", "--config", "s.yaml"], ["ffn.top_k", "at most experts"],
                            {"s.yaml": moe_text(top_k=9)}),
    "window 0": (["kv", "--config", "s.yaml"], ["sliding_window", "positive"],
                 {"s.yaml": spec_text(sliding_window=0, layer_pattern=["sliding"])}),
    "dense_layers above n_layers": (["params", "--config", "s.yaml"], ["ffn.dense_layers", "n_layers"],
                                    {"s.yaml": moe_text(dense_layers=40, dense_d_ff=100)}),
    "layer_pattern longer than n_layers": (["params", "--config", "s.yaml"], ["layer_pattern", "33 entries"],
                                           {"s.yaml": spec_text(layer_pattern=["full"] * 33)}),
    "sliding_window without sliding layers": (["kv", "--config", "s.yaml"], ["layer_pattern", "drop sliding_window"],
                                              {"s.yaml": spec_text(sliding_window=4096)}),
    "sliding layers without a window": (["kv", "--config", "s.yaml"], ["sliding_window", "set sliding_window"],
                                        {"s.yaml": spec_text(layer_pattern=["sliding", "full"])}),
    # missing and unusable files
    "missing file": (["params", "--config", "nope.yaml"], ["nope.yaml", "no such file"], None),
    "missing gpu file": (["fit", "-p", "gpt2", "--gpu", "nope.yaml"], ["nope.yaml", "no such file"], None),
    "folder for a spec": (["params", "--config", "d"], ["folder"], {"d/readme.txt": "x"}),
    "folder without config.json": (["params", "--hf-config", "d"], ["no config.json"], {"d/readme.txt": "x"}),
    "empty file": (["params", "--config", "s.yaml"], ["s.yaml", "mapping"], {"s.yaml": ""}),
    "endless device for a spec": (["params", "--config", "/dev/zero"], ["/dev/zero", "not a regular file"], None),
    "endless device for a config.json": (["params", "--hf-config", "/dev/zero"], ["/dev/zero", "not a regular file"],
                                         None),
    "empty hf file": (["params", "--hf-config", "."], ["config.json", "malformed JSON"], {"config.json": ""}),
    "binary file": (["params", "--config", "w.bin"], ["w.bin", "cannot read"], {"w.bin": bytes(range(256)) * 8}),
    "unsupported model_type": (["params", "--hf-config", "."], ["'xlnet' is not supported", "llama"],
                               {"config.json": json.dumps({"model_type": "xlnet"})}),
    "hf config missing a required key": (["params", "--hf-config", "."], ["model_type None", "supported"],
                                         {"config.json": json.dumps({"hidden_size": 4096})}),
    "hf deepseek without top_k": (["params", "--hf-config", "."], ["num_experts_per_tok", "add it"],
                                  {"config.json": json.dumps({"model_type": "deepseek_v2"})}),
    # bad option values
    "format xml": (["kv", "-p", "gpt2", "--format", "xml"], ["--format", "xml", "json"], None),
    "units foo": (["memory", "-p", "gpt2", "--units", "foo"], ["--units", "foo", "iec"], None),
    "kv-dtype int3": (["kv", "-p", "gpt2", "--kv-dtype", "int3"], ["--kv-dtype", "int3", "int4"], None),
    "tp 3 on 32 heads": (["latency", "-p", "llama2-7b", *GPU, "--tp", "3"], ["--tp", "32 attention heads"], None),
    "plot as pdf": (["sweep", "-p", "gpt2", "--seq", "1k", "--plot", "out.pdf"], ["--plot", ".png"], None),
    "plot into a missing folder": (["sweep", "-p", "gpt2", "--seq", "1k", "--plot", "no/out.png"],
                                   ["--plot", "does not exist"], None),
    "plot onto a folder": (["sweep", "-p", "gpt2", "--seq", "1k", "--plot", "out.png"], ["--plot", "folder"],
                           {"out.png/keep": "x"}),
}


def prepare(folder: Path, files: dict[str, bytes | str] | None) -> dict[str, bytes]:
    for name, content in (files or {}).items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return snapshot(folder)


@pytest.fixture(scope="module")
def catalogue_runs(tmp_path_factory):
    """Every catalogue case run once, several at a time (each in its own folder), to keep the file fast."""
    folders = {case: tmp_path_factory.mktemp("case") for case in CATALOGUE}  # one thread makes them all

    def one(case: str):
        args, _, files = CATALOGUE[case]
        before = prepare(folders[case], files)
        return run_in(folders[case], *args), before, snapshot(folders[case])

    with ThreadPoolExecutor(4) as pool:
        return dict(zip(CATALOGUE, pool.map(one, CATALOGUE)))


@pytest.mark.parametrize("case", CATALOGUE)
def test_bad_input_catalogue(catalogue_runs, case):
    result, before, after = catalogue_runs[case]
    assert_one_line_error(result, *CATALOGUE[case][1])
    assert after == before  # nothing written, nothing overwritten


def test_refused_plot_is_not_created_and_a_users_file_is_kept(tmp_path: Path):
    """A --plot target is written only after the whole run succeeded: a failing run leaves it alone."""
    mine = b"\x89PNG my own figure"
    refused(tmp_path, ["sweep", "-p", "no-such-model", "--seq", "1k", "--plot", "fig.png"], ["unknown preset"],
            {"fig.png": mine})
    assert (tmp_path / "fig.png").read_bytes() == mine
    refused(tmp_path, ["sweep", "-p", "gpt2", "--seq", "1k", "--tp", "5", "--plot", "new.png"], ["--tp"])
    assert not (tmp_path / "new.png").exists()


DETERMINISTIC = [
    ["params", "-p", "deepseek-v3"],
    ["kv", "-p", "gemma2-9b", "--batch", "8", "--seq", "10000", "--kv-dtype", "int4"],
    ["flops", "-p", "mixtral-8x7b", "--seq", "2048", "--gen", "64"],
    ["memory", "-p", "llama3-8b", "--train", "--zero", "3", "--dp", "8", "--batch", "8"],
    ["latency", "-p", "qwen3-30b-a3b", *GPU, "--batch", "4", "--gen", "32"],
    ["fit", "-p", "llama3.1-70b", *GPU, "--gpus", "4"],
    ["compare", "gqa", "mla", "swa", "-p", "llama2-7b", "--gpu", "a100-80gb"],
    ["sweep", "-p", "mistral-7b", "-p", "gpt2", "--seq", "1k..32k", "--batch", "1,8"],
    ["explain", "latency", "-p", "deepseek-v2-lite", *GPU],
]


def test_outputs_are_deterministic(tmp_path: Path):
    """The same command twice gives the same bytes, as JSON and as a table."""
    runs = [[*args, "--format", fmt] for args in DETERMINISTIC for fmt in ("json", "table")]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda a: run_in(tmp_path, *a), runs + runs))
    for args, a, b in zip(runs, results[:len(runs)], results[len(runs):]):
        assert a.returncode == 0, (args, a.stderr)
        assert a.stdout and (a.stdout, a.stderr) == (b.stdout, b.stderr), args
    assert snapshot(tmp_path) == {}


def test_a_hand_written_spec_hears_of_every_missing_field_at_once(tmp_path, cli):
    """Five missing fields once took five runs to find; one line names them all."""
    spec = tmp_path / "mine.yaml"
    spec.write_text("name: mine\nn_layers: 4\n")
    line = assert_one_line_error(cli("params", "--config", str(spec)), "missing fields")
    for field in ("vocab_size", "d_model", "max_seq_len", "tie_embeddings", "norm", "positions", "attention", "ffn"):
        assert field in line


def test_head_dim_defaults_to_d_model_over_heads(tmp_path, cli_json):
    """Left out, head_dim is d_model / heads (transformers' default): the same counts as the preset that writes
    it; where the heads do not divide d_model it must still be written."""
    r = subprocess.run([sys.executable, "-m", "llmcalc", "presets", "tiny-decoder-example", "-f", "yaml"],
                       capture_output=True, text=True, timeout=900)
    preset = yaml.safe_load(r.stdout)
    assert preset["attention"]["head_dim"] == preset["d_model"] // preset["attention"]["heads"]
    del preset["attention"]["head_dim"]
    spec = tmp_path / "no-head-dim.yaml"
    spec.write_text(yaml.safe_dump(preset))
    assert cli_json("params", "--config", str(spec))["total"] == cli_json("params", "-p", "tiny-decoder-example")["total"]
    spec.write_text(yaml.safe_dump(preset | {"d_model": preset["d_model"] - 12}))
    r = subprocess.run([sys.executable, "-m", "llmcalc", "params", "--config", str(spec)], capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 2 and "attention.head_dim" in r.stderr
