"""The reference model's gated cross-attention layer (llmcalc/reference/cross_attention.py, Llama 3.2 Vision's):
against transformers' MllamaTextCrossAttention with the same weights, and the tiny mllama's language model through
validate on real tensors and through cached steps."""

import dataclasses
import warnings

import pytest

torch = pytest.importorskip("torch")

from conftest import run_cli  # noqa: E402
from test_reference import assert_cache_consistent  # noqa: E402
from test_vision import MLLAMA_TINY_TEXT, tiny_mllama_spec  # noqa: E402

from llmcalc.reference.cross_attention import GatedCrossAttentionMixer  # noqa: E402
from llmcalc.reference.layers import Step  # noqa: E402
from llmcalc.views.validate import validate  # noqa: E402


def cross_layer_spec():
    spec = tiny_mllama_spec()
    return spec.model_copy(update={"attention": spec.mixers["cross_attention"]})


def test_cross_layer_equals_transformers():
    """Same q, k, v, o and q/k norm weights: the layer's output before its tanh gate equals
    MllamaTextCrossAttention's on the same text states and image states (fp32, eager attention)."""
    pytest.importorskip("transformers")
    from transformers import MllamaTextConfig
    from transformers.models.mllama.modeling_mllama import MllamaTextCrossAttention

    config = MllamaTextConfig(**MLLAMA_TINY_TEXT, rms_norm_eps=1e-6)  # the reference's RMSNorm eps
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = MllamaTextCrossAttention(config, layer_idx=1).eval()
    for p in theirs.parameters():
        torch.nn.init.normal_(p, std=0.3)
    ours = GatedCrossAttentionMixer(cross_layer_spec(), None)
    with torch.no_grad():
        for mine, hf in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("o", "o_proj"), ("q_norm", "q_norm"),
                         ("k_norm", "k_norm")):
            getattr(ours, mine).weight.copy_(getattr(theirs, hf).weight)
        ours.gates.copy_(torch.tensor([0.7, -0.4]))
        x = torch.randn(2, 7, 64)
        states = ours.image_states(2, x)
        want = theirs(x, cross_attention_states=states)[0]
        got = ours(x, None, Step(start=0, rope=None, alibi=None, absorbed=False)) / torch.tanh(torch.tensor(0.7))
    assert want.std() > 0.1
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_tiny_mllama_language_model_validates_on_real_tensors():
    """Params, prefill / decode / train FLOPs and the cache (2 self-attention layers' K/V per token, 2 cross layers'
    K/V of the image's 10 tokens) measured on real tensors equal the estimates; the tower's rows are left out."""
    report = validate([tiny_mllama_spec()], 2, 12, "cpu")
    assert report.ok, [r for r in report.rows if not r.ok]
    assert {"params", "prefill FLOPs", "decode FLOPs", "train FLOPs", "KV cache bytes"} <= {
        r.quantity for r in report.rows}
    assert any("vision rows left out" in n for n in report.notes)


@pytest.mark.parametrize("chunks", [(12, 1, 1), (3, 4, 5, 1)], ids=["prefill+decode", "chunked"])
def test_cached_steps_equal_one_full_forward(chunks):
    """The image keys are projected once, at the prompt, and read from the cache by every later step."""
    assert assert_cache_consistent(tiny_mllama_spec(), chunks).std() > 0.1


def test_validate_the_11b_language_model_exits_0():
    r = run_cli("validate", "-p", "llama-3.2-11b-vision", "--device", "fake", "--layers", "4", "--batch", "1",
                "--seq", "16")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all rows pass" in r.stdout and "vision rows left out" in r.stdout.replace("\n", " ")


def test_step_is_the_dataclass_the_layer_reads():
    assert {f.name for f in dataclasses.fields(Step)} >= {"start", "rope", "alibi", "absorbed", "serving"}
