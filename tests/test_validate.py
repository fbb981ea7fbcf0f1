"""`llmcalc validate`: estimates against the torch reference model, and its bad-input paths."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_bad_input import assert_one_line_error

from llmcalc.inputs.presets import load_preset
from llmcalc.views.validate import gpu_preset, scaled_copy

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("name", ["llama3-8b", "mistral-7b", "mixtral-8x7b", "deepseek-v3", "gpt2", "gemma2-9b"])
def test_scaled_copy_keeps_the_family(name):
    spec = load_preset(name)
    small = scaled_copy(spec, 2, 8)
    assert small.n_layers == 2 and small.d_model == spec.d_model // 8
    assert small.attention.kind == spec.attention.kind and small.ffn.kind == spec.ffn.kind
    assert small.sliding_window == spec.sliding_window


def test_gpu_names_map_to_presets():
    assert gpu_preset("NVIDIA H100 80GB HBM3") == "h100-sxm"
    assert gpu_preset("NVIDIA H200") == "h200"
    assert gpu_preset("NVIDIA A100-SXM4-80GB") == "a100-80gb"
    assert gpu_preset("NVIDIA H100 PCIe") == "h100-pcie"
    assert (gpu_preset("NVIDIA H20"), gpu_preset("NVIDIA H800"), gpu_preset("NVIDIA GB200")) == ("h20", "h800", "gb200")


@pytest.mark.parametrize("name", ["llama2-7b", "mixtral-8x7b", "deepseek-v2-lite", "gemma2-9b", "gpt2"])
def test_validate_fake_full_size_passes(cli_json, name):
    r = cli_json("validate", "--preset", name, "--device", "fake", "--batch", "2", "--seq", "64")
    assert r["ok"] is True, [x for x in r["rows"] if not x["ok"]]
    quantities = {x["quantity"] for x in r["rows"]}
    assert {"params", "prefill FLOPs", "decode FLOPs", "train FLOPs", "KV cache bytes"} <= quantities
    for x in r["rows"]:
        assert set(x) >= {"quantity", "estimate", "measured", "rel_error", "ok"}


@pytest.mark.parametrize("name,mla", [("llama3-8b", "absorbed"), ("mistral-7b", "absorbed"),
                                      ("qwen3-30b-a3b", "absorbed"), ("deepseek-v3", "absorbed"),
                                      ("deepseek-v3", "decompress"), ("gpt2", "absorbed")])
def test_validate_cpu_scaled_real_run(cli_json, name, mla):
    r = cli_json("validate", "--preset", name, "--device", "cpu", "--layers", "3", "--scale", "8",
                 "--batch", "2", "--seq", "40", "--mla-decode", mla)
    assert r["ok"] is True, [x for x in r["rows"] if not x["ok"]]


def test_cuda_without_gpu_is_a_clear_error(cli):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert_one_line_error(cli("validate", "--preset", "gpt2", "--device", "cuda"), "--device cuda", "fake")


def test_too_large_for_a_real_cpu_run(cli):
    assert_one_line_error(cli("validate", "--preset", "llama3.1-405b", "--device", "cpu"), "--device cpu",
                          "--device fake", "--layers")


@pytest.mark.parametrize("name, batch, seq", [("llama3-8b", 16, 8192), ("mixtral-8x7b", 64, 32768)])
def test_peak_memory_holds_as_batch_and_context_grow(cli_json, name, batch, seq):
    """Where the activations are a large share of the peak (they were 10-21% under before the inference
    peak counted every stage), the peak-memory row passes at full size."""
    r = cli_json("validate", "--preset", name, "--device", "fake", "--batch", str(batch), "--seq", str(seq))
    peak = next(x for x in r["rows"] if x["quantity"] == "peak memory")
    assert peak["ok"] and peak["rel_error"] < 0.005, peak
    assert all(type(x["estimate"]) is int for x in r["rows"])  # exact, even above 2^53


def test_table_names_the_model_and_its_shape(cli):
    r = cli("validate", "-p", "llama3-8b", "--device", "cpu", "--layers", "2", "--scale", "8", "--batch", "1",
            "--seq", "16")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("validate llama3-8b (2 layers, widths ÷8) on cpu")


def test_encoders_and_encoder_decoders_are_validated_beside_decoders():
    """A run over many models (validate --all) keeps an encoder-decoder and an encoder beside a decoder: the
    reference builds each (llmcalc/reference/encoder_decoder.py), and every row passes."""
    from llmcalc.views.validate import validate

    specs = [load_preset(n) for n in ("t5-small", "bert-base-uncased", "tiny-decoder-example")]
    report = validate(specs, batch=1, seq=16, device="fake")
    assert report.models == ["t5-small", "bert-base-uncased", "tiny-decoder-example"] and report.ok
    assert not any("left out" in n for n in report.notes)


def test_time_rows_check_the_roofline_as_a_lower_bound():
    """On cuda the roofline's times pass when they are at most the measurement, however far below."""
    from llmcalc.views.validate import lower_bound_row

    below, above = (lower_bound_row("m", "prefill time (s)", "roofline", e, 0.010) for e in (0.002, 0.011))
    assert below.ok and below.bound and below.rel_error == pytest.approx(0.8)
    assert not above.ok


def test_several_models_show_one_line_each_and_detail_every_row():
    """`validate --all` at 80 columns was once ~1,800 stacked lines. Several models: a line per model with
    its row count, failures and largest error; --detail every row, as JSON always carries."""
    import os

    env = os.environ | {"COLUMNS": "80"}
    args = [sys.executable, "-m", "llmcalc", "validate", "-p", "llama2-7b", "-p", "gpt2"]
    short = subprocess.run(args, capture_output=True, text=True, env=env, timeout=900)
    full = subprocess.run([*args, "--detail"], capture_output=True, text=True, env=env, timeout=900)
    rows = json.loads(subprocess.run([*args, "-f", "json"], capture_output=True, text=True, timeout=900).stdout)
    assert short.returncode == full.returncode == 0
    assert "--detail shows every row" in short.stdout and "prefill FLOPs" not in short.stdout
    per_model = [line for line in short.stdout.splitlines() if line.lstrip("│ ").startswith(("llama2-7b", "gpt2"))]
    assert len(per_model) == 2 and all(f" {len(rows['rows']) // 2} " in line for line in per_model)
    assert full.stdout.count("prefill FLOPs") == 2
