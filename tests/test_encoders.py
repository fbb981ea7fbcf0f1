"""Encoder-only models (BERT, RoBERTa, ModernBERT) against independent sources.

- parameters: transformers' bare model (AutoModel: BertModel, RobertaModel with their pooler, ModernBertModel) from the
  real config.json on the meta device (tests/test_transformers_parity.py covers every fixture; here the
  presets and the published sizes of Devlin et al. 2019, Section 3: BERT-base 110M, BERT-large 340M);
- FLOPs: torch's FlopCounterMode over that model's forward, and forward + backward, on meta tensors;
- no KV cache, no decode; commands that time generation refuse an encoder with exit code 2.
"""

from __future__ import annotations


import pytest
from conftest import run_cli
from hf_counts import fixture_source
from pydantic import ValidationError

from llmcalc.costs.flops import flops
from llmcalc.costs.kv import kv_cache
from llmcalc.costs.memory import memory
from llmcalc.costs.params import params
from llmcalc.inputs.hf import load_hf_config
from llmcalc.inputs.presets import load_preset
from llmcalc.model.spec import ModelSpec
from llmcalc.workload import Workload

ENCODERS = ["bert-base-uncased", "bert-large-uncased", "roberta-base"]


def two_figures(n: int) -> int:
    """n rounded to two significant figures, as papers quote sizes (109.5M → 110M)."""
    return int(float(f"{n:.2g}"))


@pytest.mark.parametrize(("name", "published"), [("bert-base-uncased", 110_000_000),
                                                 ("bert-large-uncased", 340_000_000)])
def test_published_bert_sizes(name, published, hf_fixture):
    """Devlin et al. 2019 (arXiv:1810.04805), Section 3: BERT_BASE 110M, BERT_LARGE 340M parameters."""
    assert two_figures(params(load_hf_config(hf_fixture(name))).total) == published


def test_published_modernbert_size(hf_fixture):
    """The ModernBERT-base model card (https://huggingface.co/answerdotai/ModernBERT-base, Model Summary; Warner
    et al. 2024, arXiv:2412.13663): 22 layers, 149 million parameters."""
    assert round(params(load_hf_config(hf_fixture("modernbert-base"))).total / 1e6) == 149


@pytest.mark.parametrize("name", ["bert-base-uncased", "roberta-base", "modernbert-base"])
def test_preset_is_the_import_of_its_config(name, hf_fixture):
    preset = load_preset(name)
    imported = load_hf_config(hf_fixture(name))
    assert preset.model_dump(exclude={"name", "source", "checkpoint"}) == imported.model_dump(
        exclude={"name", "source", "checkpoint"})
    assert preset.source == fixture_source(name)


def _counted(name: str, batch: int, seq: int) -> tuple[int, int]:
    """FlopCounterMode's FLOPs of transformers' bare model: one forward, and forward + backward."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from hf_counts import build_config, fixture_config
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        model = transformers.AutoModel.from_config(build_config(fixture_config(name)))
    ids = torch.ones(batch, seq, dtype=torch.long, device="meta")
    with FlopCounterMode(display=False) as fwd:
        with torch.no_grad():
            model(input_ids=ids)
    with FlopCounterMode(display=False) as step:
        out = model(input_ids=ids)
        pooled = out.pooler_output.sum() if getattr(out, "pooler_output", None) is not None else 0
        (out.last_hidden_state.sum() + pooled).backward()
    return fwd.get_total_flops(), step.get_total_flops()


@pytest.mark.parametrize("name", ["bert-base-uncased", "roberta-base"])
@pytest.mark.parametrize(("batch", "seq"), [(2, 128), (1, 512)])
def test_flops_equal_flop_counter(name, batch, seq, hf_fixture):
    """Forward: every matmul, S² pairs per layer (bidirectional), the pooler, no LM head; the training step is
    forward + backward; both under either attention convention (an encoder masks nothing)."""
    forward, step = _counted(name, batch, seq)
    for attention in ("causal", "dense"):
        r = flops(load_hf_config(hf_fixture(name)), Workload(batch=batch, seq=seq, attention_core=attention))
        assert (r.prefill_flops, r.train_flops) == (forward, step)
        assert (r.decode_flops, r.generate_flops, r.logits) == (0, 0, "none")


def test_modernbert_dense_equals_flop_counter_and_causal_counts_the_band(hf_fixture):
    """transformers masks ModernBERT's local layers inside a dense S×S product (sdpa): FlopCounterMode counts S²
    in every layer, the dense convention. The causal convention counts only the unmasked band, |i − j| ≤ 64
    (local_attention 128 // 2), here counted pair by pair, in the 14 of 22 layers that are local (i % 3 ≠ 0),
    4·d FLOPs per pair (scores and values)."""
    name, batch, seq = "modernbert-base", 2, 256
    forward, _ = _counted(name, batch, seq)
    spec = load_hf_config(hf_fixture(name))
    dense = flops(spec, Workload(batch=batch, seq=seq, attention_core="dense")).prefill_flops
    causal = flops(spec, Workload(batch=batch, seq=seq, attention_core="causal")).prefill_flops
    band = sum(1 for i in range(seq) for j in range(seq) if abs(i - j) <= 64)
    local_layers = sum(1 for i in range(22) if i % 3)
    assert dense == forward
    assert dense - causal == local_layers * batch * (seq * seq - band) * 4 * 768


def test_no_kv_cache_and_weights_are_the_params():
    spec = load_preset("bert-base-uncased")
    w = Workload(batch=8, seq=512)
    assert kv_cache(spec, w).total_bytes == 0
    m = memory(spec, w)
    assert m.kv_cache_bytes == 0
    assert m.weights_bytes == 2 * params(spec).total  # bf16


def test_training_memory_holds_every_parameter():
    """Mixed-precision AdamW: bf16 weights and gradients, fp32 master + two states = 16 bytes a parameter."""
    spec = load_preset("roberta-base")
    m = memory(spec, Workload(batch=4, seq=512, train=True))
    assert m.weights_bytes + m.gradient_bytes + m.optimizer_bytes == 16 * params(spec).total


def test_an_encoder_has_no_lm_head_or_mtp():
    data = load_preset("bert-base-uncased").model_dump()
    with pytest.raises(ValidationError, match="tie_embeddings"):
        ModelSpec.model_validate(data | {"tie_embeddings": False})
    with pytest.raises(ValidationError, match="mtp_modules"):
        ModelSpec.model_validate(data | {"mtp_modules": 1})


@pytest.mark.parametrize("command", [["latency", "--gpu", "h100-sxm"], ["fit", "--gpu", "h100-sxm"],
                                     ["sweep", "--gpu", "h100-sxm"], ["serve", "--gpu", "h100-sxm"],
                                     ["explain", "params"], ["compare"]])
def test_generation_commands_refuse_an_encoder(command):
    r = run_cli(*command, "-p", "bert-base-uncased")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, (r.returncode, r.stderr)
    assert "encoder-only" in r.stderr


def test_params_and_flops_run_on_an_encoder():
    r = run_cli("flops", "-p", "roberta-base", "--seq", "512", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert '"decode_flops": 0' in r.stdout
