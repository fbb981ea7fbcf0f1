"""A checkpoint that states its KV cache's quantisation (ModelOpt's kv_cache_quant_algo in hf_quant_config.json,
compressed-tensors' kv_cache_scheme) is read into the spec, and the engines whose default cache dtype takes it
(presets/engines/*.yaml `checkpoint_kv`: vLLM a ModelOpt FP8 cache, TensorRT-LLM ModelOpt's and compressed-tensors')
run their pool in it when --kv-dtype is left out; SGLang and the reference keep the model's dtype; --kv-dtype
sets another. The pool of an FP8 cache holds twice
the tokens of a bf16 one in the same bytes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

import llmcalc
from llmcalc.inputs.hf import load_hf_config


def _folder(tmp_path, hf_fixture, quant: dict | None = None, config_quant: dict | None = None):
    folder = tmp_path / "llama3-8b-quantised"
    tmp_path.mkdir(exist_ok=True)
    shutil.copytree(hf_fixture("llama3-8b"), folder)
    if quant is not None:
        (folder / "hf_quant_config.json").write_text(json.dumps({"producer": {"name": "modelopt"},
                                                                 "quantization": quant}))
    if config_quant is not None:
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps(config | {"quantization_config": config_quant}))
    return folder


def _compressed(kv_scheme):
    weights = {"num_bits": 8, "type": "float", "strategy": "channel"}
    return {"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": weights}},
            "kv_cache_scheme": kv_scheme}


FP8_SCHEME = _compressed({"num_bits": 8, "type": "float", "strategy": "tensor"})


@pytest.mark.parametrize("quant, config_quant, stated, by", [
    ({"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}, None, "fp8", "modelopt"),
    ({"quant_algo": "FP8", "kv_cache_quant_algo": None}, None, None, None),
    ({"quant_algo": "NVFP4", "kv_cache_quant_algo": "NVFP4"}, None, None, None),  # no KV dtype here stands for it
    (None, FP8_SCHEME, "fp8", "compressed-tensors"),
    (None, _compressed({"num_bits": 8, "type": "int", "strategy": "tensor"}), "int8", "compressed-tensors"),
    (None, _compressed(None), None, None),
])
def test_the_kv_dtype_a_checkpoint_states_is_read(tmp_path, hf_fixture, quant, config_quant, stated, by):
    checkpoint = load_hf_config(_folder(tmp_path, hf_fixture, quant, config_quant)).checkpoint
    assert (checkpoint.kv_dtype, checkpoint.kv_quantizer) == (stated, by)


def test_engines_that_take_the_checkpoints_kv_dtype_hold_twice_the_tokens(tmp_path, hf_fixture):
    folder = str(_folder(tmp_path, hf_fixture, {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}))
    run = dict(gpu="h100-sxm", requests=20, prompt="256", output="16")
    for engine, taken in (("vllm", "fp8"), ("trtllm", "fp8"), ("sglang", "bf16"), ("reference", "bf16")):
        default = llmcalc.serve(folder, engine=engine, **run)
        bf16 = llmcalc.serve(folder, engine=engine, kv_dtype="bf16", **run)
        noted = [n for n in default.notes if "the checkpoint states it" in n]
        assert bool(noted) == (taken == "fp8"), (engine, default.notes)
        ratio = default.kv_tokens / bf16.kv_tokens
        assert ratio == (pytest.approx(2, rel=1e-3) if taken == "fp8" else 1), engine  # same bytes, half a token's
    lat = llmcalc.latency(folder, "h100-sxm", batch=4, seq=1024, gen=8)
    assert lat.kv_dtype == "fp8" and any("the checkpoint states it" in n for n in lat.notes)
    assert llmcalc.latency(folder, "h100-sxm", batch=4, seq=1024, gen=8, kv_dtype="bf16").kv_dtype == "bf16"
    assert llmcalc.fit(folder, "h100-sxm").kv_dtype == "bf16"  # no engine: no engine's default
    assert llmcalc.fit(folder, "h100-sxm", engine="trtllm").kv_dtype == "fp8"
    compressed = str(_folder(tmp_path / "ct", hf_fixture, config_quant=FP8_SCHEME))  # vLLM takes ModelOpt's only
    assert [llmcalc.fit(compressed, "h100-sxm", engine=e).kv_dtype for e in ("vllm", "trtllm")] == ["bf16", "fp8"]


def test_the_cli_says_which_kv_dtype_it_took(tmp_path, hf_fixture):
    folder = str(_folder(tmp_path, hf_fixture, {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}))
    base = [sys.executable, "-m", "llmcalc", "serve", "--hf-config", folder, "--gpu", "h100-sxm", "-n", "20"]
    taken = subprocess.run(base, capture_output=True, text=True, timeout=300)
    assert taken.returncode == 0 and "the checkpoint states it" in " ".join(taken.stdout.split()), taken.stderr
    given = subprocess.run([*base, "--kv-dtype", "bf16"], capture_output=True, text=True, timeout=300)
    assert given.returncode == 0 and "checkpoint states" not in given.stdout


def test_measured_predicts_in_the_kv_dtype_serve_would_take(tmp_path, hf_fixture):
    """`measured` sets a run beside serve's prediction, so it takes serve's default cache dtype: the checkpoint's
    stated FP8 under vLLM, said in `given`; its `serve_args` name no --kv-dtype (serve takes the same), and do where
    one was given."""
    from conftest import FIXTURES

    folder = str(_folder(tmp_path, hf_fixture, {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}))
    result = FIXTURES / "benchmarks" / "vllm_bench_serve.json"
    run = dict(gpu="h100-sxm", engine="vllm", requests=20)
    [taken] = llmcalc.measured(result, folder, **run).runs
    [bf16] = llmcalc.measured(result, folder, kv_dtype="bf16", **run).runs
    [sglang] = llmcalc.measured(result, folder, **run | {"engine": "sglang"}).runs
    assert any("KV cache fp8: the checkpoint states it" in g for g in taken.given), taken.given
    assert "--kv-dtype" not in taken.serve_args
    assert "--kv-dtype" in bf16.serve_args and not any("KV cache" in g for g in bf16.given)
    assert not any("KV cache" in g for g in sglang.given)  # SGLang's default cache dtype is the model's


def test_plan_runs_a_quantised_checkpoint_as_it_ships(tmp_path, hf_fixture):
    """`plan` searches a checkpoint that ships quantised in its own formats only (a bf16 or an fp8 run of it would be
    another checkpoint), its KV cache in the engine's default as `serve` takes it: every candidate's pool is the one
    `serve` reports for that deployment, and the weights per GPU are the checkpoint's (fp8: half a bf16 run's)."""
    folder = str(_folder(tmp_path, hf_fixture, {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}))
    run = dict(gpu="h100-sxm", rate=2.0, slo_tpot=0.05, max_gpus=2, top=2, requests=40)
    for engine, kv in (("vllm", "fp8"), ("sglang", "bf16")):  # SGLang's default cache dtype is the model's
        r = llmcalc.plan(folder, engine=engine, **run)
        assert r.candidates and {(c.weights_dtype, c.shipped, c.kv_dtype) for c in r.candidates} == {
            ("fp8-tensor", True, kv)}, engine
        c = r.candidates[0]
        served = llmcalc.serve(folder, gpu="h100-sxm", engine=engine, tp=c.tp, pp=c.pp, dp=c.dp, requests=20,
                               max_seqs=c.max_seqs)
        assert served.kv_tokens == c.kv_tokens, engine
        bf16 = llmcalc.serve(folder, gpu="h100-sxm", engine=engine, tp=c.tp, pp=c.pp, dp=c.dp, requests=20,
                             max_seqs=c.max_seqs, weights_dtype="bf16", kv_dtype=kv)
        assert bf16.kv_tokens < c.kv_tokens, engine  # the pool beside the shipped fp8 weights, not bf16 ones
        assert any("weights as the checkpoint ships them (fp8-tensor" in n for n in r.notes), r.notes


def test_plan_emits_a_shipped_checkpoint_in_its_own_quantisation(tmp_path, hf_fixture):
    """The launch of a shipped candidate takes the checkpoint's own dtype and quantisation (no --quantization) and the
    engine's default cache dtype; TensorRT-LLM, which takes fp8 only from a pre-quantised checkpoint, launches it."""
    folder = str(_folder(tmp_path, hf_fixture, {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}))
    run = dict(gpu="h100-sxm", rate=2.0, slo_tpot=0.05, max_gpus=1, top=1, requests=40)
    for engine, cache in (("vllm", "--kv-cache-dtype"), ("sglang", "--kv-cache-dtype")):
        e = llmcalc.plan(folder, emit=engine, **run).emit
        argv = e.launch.argv
        assert "--quantization" not in argv and argv[argv.index("--dtype") + 1] == "auto", argv
        assert argv[argv.index(cache) + 1] == "auto", argv
        assert any("as the checkpoint ships them (fp8-tensor" in n for n in e.notes), e.notes
    trt = llmcalc.plan(folder, emit="trtllm", **run).emit
    assert trt.unsupported is None and trt.launch is not None


@pytest.mark.parametrize("quant, name", [
    ({"quant_method": "gptq", "bits": 4, "group_size": 128}, "gptq-int4-g128"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}, "nf4"),
    ({"quant_method": "bitsandbytes", "load_in_8bit": True}, "bnb-int8")])
def test_trtllm_is_not_emitted_for_a_weight_only_checkpoint(tmp_path, hf_fixture, quant, name):
    """TensorRT-LLM's PyTorch backend runs checkpoints quantised to FP8 or FP4; a weight-only one (GPTQ, AWQ,
    bitsandbytes) gets one line instead of a launch, and vLLM still gets its commands."""
    folder = str(_folder(tmp_path, hf_fixture, config_quant=quant))
    run = dict(gpu="h100-sxm", rate=2.0, slo_tpot=0.05, max_gpus=1, top=1, requests=40)
    trt = llmcalc.plan(folder, emit="trtllm", **run)
    assert trt.candidates[0].weights_dtype == name
    assert trt.emit.launch is None and f"weight-only {name}" in trt.emit.unsupported
    assert llmcalc.plan(folder, emit="vllm", **run).emit.launch is not None
