"""Mamba-1 (and Falcon-Mamba) against transformers' own MambaForCausalLM / FalconMambaForCausalLM (the pure-torch
paths, CPU, fp32).

Parameters: the model built on the meta device. State bytes: the conv and recurrent states of the model's own
cache after a prefill. FLOPs: torch's FlopCounterMode over a prefill and a decode step (the projections, the
conv, and the scan's output C·h, a bmm per token; the element-wise recurrence is not a matmul, so neither side
counts it: docs/mamba.md#mamba-1).
"""

from __future__ import annotations

import json

import pytest

from llmcalc.costs.flops import flops
from llmcalc.costs.kv import kv_bytes
from llmcalc.costs.params import params
from llmcalc.inputs.hf import load_hf_config
from llmcalc.workload import Workload

torch = pytest.importorskip("torch", reason="torch is not installed: pip install torch (CI installs it)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[test]'")
from hf_flops import cache_tensors  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

TINY = {"model_type": "mamba", "vocab_size": 100, "hidden_size": 64, "state_size": 8, "num_hidden_layers": 2,
        "expand": 2, "conv_kernel": 4, "time_step_rank": 6, "use_bias": True, "use_conv_bias": True,
        "tie_word_embeddings": False}
"""Small enough for CPU; biases on, an explicit dt rank and an untied head, so each option is counted."""
INNER, K, N, L = 128, 4, 8, 2


def write(tmp_path, raw):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    return load_hf_config(path)


def hf(raw):
    cls = {"mamba": (transformers.MambaConfig, transformers.MambaForCausalLM),
           "falcon_mamba": (transformers.FalconMambaConfig, transformers.FalconMambaForCausalLM)}[raw["model_type"]]
    return cls[0](**{k: v for k, v in raw.items() if k != "model_type"}), cls[1]


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    return write(tmp_path_factory.mktemp("mamba"), TINY)


@pytest.fixture(scope="module")
def model():
    cfg, cls = hf(TINY)
    torch.manual_seed(0)
    return cls(cfg).eval()


def _counted(fn) -> dict[str, int]:
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        fn()
    return {str(op): n for op, n in fc.get_flop_counts()["Global"].items()}


@pytest.mark.parametrize("raw", [TINY, TINY | {"model_type": "falcon_mamba"},
                                 TINY | {"time_step_rank": "auto", "use_bias": False, "tie_word_embeddings": True},
                                 {"model_type": "mamba"}, {"model_type": "falcon_mamba", "hidden_size": 4096,
                                                           "num_hidden_layers": 64, "vocab_size": 65024}])
def test_params_equal_transformers_on_meta(tmp_path, raw):
    """Tiny variants, transformers' defaults (mamba-130m's shape) and Falcon-Mamba-7B's shape."""
    cfg, cls = hf(raw)
    with torch.device("meta"):
        m = cls(cfg)
    assert params(write(tmp_path, raw)).total == sum(p.numel() for p in m.parameters())


@pytest.mark.parametrize("seq", [11, 30])
def test_state_bytes_equal_the_models_cache_whatever_the_length(spec, model, seq):
    batch = 2
    with torch.no_grad():
        cache = model(torch.randint(0, 100, (batch, seq)), use_cache=True).past_key_values
    held = sum(t.nbytes for t in cache_tensors(cache))
    assert kv_bytes(spec, batch, seq, "fp32") == held == L * batch * (INNER * N + INNER * K) * 4


def test_state_is_fp32_beside_a_bf16_conv_state(spec, model):
    """In bf16 the conv state follows the weights and the SSM state stays fp32, as cache_bytes has it."""
    m = transformers.MambaForCausalLM(hf(TINY)[0]).eval().to(torch.bfloat16)
    with torch.no_grad():
        cache = m(torch.randint(0, 100, (2, 11)), use_cache=True).past_key_values
    assert kv_bytes(spec, 2, 11, "bf16") == sum(t.nbytes for t in cache_tensors(cache))


def test_prefill_flops_equal_flop_counter(spec, model):
    batch, seq = 2, 11
    ids = torch.randint(0, 100, (batch, seq))
    measured = _counted(lambda: model(ids, use_cache=False))
    rows = {r.component: r.prefill for r in flops(spec, Workload(batch=batch, seq=seq, logits="all")).breakdown}
    proj = sum(rows[f"attention/{k}"] for k in ("in_proj", "x_proj", "dt_proj", "out_proj")) + rows["lm_head"]
    assert proj == measured["aten.mm"] + measured["aten.addmm"]
    assert rows["attention/core_state_output"] == measured["aten.bmm"]  # C·h, one bmm per token
    # nn.Conv1d with padding K − 1 computes S + K − 1 outputs per sequence and the mixer keeps the first S
    assert rows["attention/core_conv"] + 2 * INNER * K * (K - 1) * batch * L == measured["aten.convolution"]


def test_decode_step_flops_equal_flop_counter(spec, model):
    batch, seq = 2, 11
    ids = torch.randint(0, 100, (batch, seq))
    with torch.no_grad():
        cache = model(ids, use_cache=True).past_key_values
    measured = _counted(lambda: model(ids[:, :1], past_key_values=cache, use_cache=True))
    rows = {r.component: r.decode for r in flops(spec, Workload(batch=batch, seq=seq)).breakdown}
    proj = sum(rows[f"attention/{k}"] for k in ("in_proj", "x_proj", "dt_proj", "out_proj")) + rows["lm_head"]
    assert proj == measured["aten.mm"] + measured["aten.addmm"]
    assert rows["attention/core_state_output"] == measured["aten.bmm"]
    # transformers' step runs the padded conv over the K inputs it keeps (the new one last): K + K − 1 outputs, of
    # which it keeps the last
    assert (2 * K - 1) * rows["attention/core_conv"] == measured["aten.convolution"]


def test_decode_cost_and_state_do_not_grow_with_context(spec):
    short, long = (flops(spec, Workload(batch=1, seq=s)) for s in (100, 100_000))
    assert short.decode_flops == long.decode_flops
    assert kv_bytes(spec, 1, 100, "bf16") == kv_bytes(spec, 1, 100_000, "bf16") > 0
