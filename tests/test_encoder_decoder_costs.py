"""Encoder-decoder FLOPs, cross-attention cache and memory against independent sources.

- FLOPs: torch's FlopCounterMode on transformers' T5ForConditionalGeneration, BartForConditionalGeneration and
  WhisperForConditionalGeneration, tiny random-weight models on CPU with eager attention: a forward of an encoder
  input (S_e tokens; Whisper: mel features of 2·S_e frames through its conv stem) and a decoder input
  (S tokens), then one decode step over the returned cache (encoder output given, nothing re-encoded), and a
  training step's forward + backward. The conventions that match what transformers runs: attention `dense` (its
  eager attention multiplies the full S × S scores of the decoder prompt; the encoder and the cross-attention have
  no mask to skip) and logits `all` (the model projects every decoder position).
- Cache bytes: the EncoderDecoderCache the same forward returns, its self-attention and its cross-attention caches
  summed tensor by tensor apart.
- `--encoder-seq` is refused on a decoder (exit 2, one line).
"""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

from llmcalc.costs.flops import flops
from llmcalc.costs.kv import kv_cache
from llmcalc.costs.memory import memory
from llmcalc.errors import UserError
from llmcalc.inputs.hf import load_hf_config
from llmcalc.inputs.presets import load_preset
from llmcalc.workload import Workload

T5 = dict(model_type="t5", vocab_size=96, d_model=32, d_kv=8, d_ff=48, num_layers=2, num_decoder_layers=3,
          num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=16,
          feed_forward_proj="gated-gelu", tie_word_embeddings=False, n_positions=512, decoder_start_token_id=0,
          pad_token_id=0)
"""A tiny T5 v1.1 (gated GELU, untied head) with more decoder than encoder layers and d_kv · H ≠ d."""
T5_RELU = T5 | dict(feed_forward_proj="relu", tie_word_embeddings=True, num_decoder_layers=2)
BART = dict(model_type="bart", vocab_size=96, d_model=32, encoder_layers=2, decoder_layers=2,
            encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=48, decoder_ffn_dim=48,
            max_position_embeddings=128, activation_function="gelu", scale_embedding=False, decoder_start_token_id=2,
            pad_token_id=1)
WHISPER = dict(model_type="whisper", vocab_size=96, num_mel_bins=8, d_model=32, encoder_layers=2, decoder_layers=3,
               encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=48, decoder_ffn_dim=48,
               max_source_positions=16, max_target_positions=32, decoder_start_token_id=1, pad_token_id=0)
"""A tiny Whisper: 8 mel bins, 32 mel frames halved to 16 encoder positions by the conv stem."""
B, S, S_E = 2, 5, 7


def _model(config: dict):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = transformers.AutoConfig.for_model(**config)
    torch.manual_seed(0)
    auto = transformers.AutoModelForSpeechSeq2Seq if config is WHISPER else transformers.AutoModelForSeq2SeqLM
    return auto.from_config(cfg, attn_implementation="eager").eval()


def _inputs(config: dict, seed: int):
    """The encoder's input (token ids, or Whisper's mel features: mel_bins × 2·max_source_positions frames) and B × S
    decoder tokens."""
    torch = pytest.importorskip("torch")

    gen = torch.Generator().manual_seed(seed)
    dec = torch.randint(3, 96, (B, S), generator=gen)
    if config is WHISPER:
        frames = 2 * config["max_source_positions"]
        return {"input_features": torch.randn(B, config["num_mel_bins"], frames, generator=gen)}, dec
    return {"input_ids": torch.randint(3, 96, (B, S_E), generator=gen)}, dec


def _spec(config: dict, tmp_path):
    path = tmp_path / config["model_type"]
    path.mkdir(exist_ok=True)
    (path / "config.json").write_text(json.dumps(config))
    return load_hf_config(path)


def _measure(config: dict):
    """FlopCounterMode totals of a forward (encoder B × S_E, decoder B × S) and of the decode step after it, with the
    cache bytes the forward returned: (prefill, decode, self-attention cache, cross-attention cache)."""
    torch = pytest.importorskip("torch")
    from hf_flops import cache_tensors
    from torch.utils.flop_counter import FlopCounterMode

    model = _model(config)
    enc, dec = _inputs(config, 1)
    nxt = dec[:, :1]
    with torch.no_grad():
        with FlopCounterMode(display=False) as counter:
            out = model(**enc, decoder_input_ids=dec, use_cache=True)
        prefill = counter.get_total_flops()
        cache = out.past_key_values
        held = [sum(t.numel() * t.element_size() for t in cache_tensors(c))
                for c in (cache.self_attention_cache, cache.cross_attention_cache)]
        with FlopCounterMode(display=False) as counter:
            model(encoder_outputs=(out.encoder_last_hidden_state,), decoder_input_ids=nxt, past_key_values=cache,
                  use_cache=True)
    return prefill, counter.get_total_flops(), *held


def _workload(config: dict) -> Workload:
    """Whisper's encoder length is fixed by its config (max_source_positions), the others read S_E tokens."""
    return Workload(batch=B, seq=S, encoder_seq=None if config is WHISPER else S_E, attention_core="dense",
                    logits="all", kv_dtype="fp32")


CONFIGS = pytest.mark.parametrize("config", [T5, T5_RELU, BART, WHISPER], ids=["t5-gated", "t5-relu", "bart",
                                                                             "whisper"])


@CONFIGS
def test_flops_and_caches_equal_transformers(config, tmp_path):
    spec, w = _spec(config, tmp_path), _workload(config)
    prefill, decode, self_bytes, cross_bytes = _measure(config)
    r, kv = flops(spec, w), kv_cache(spec, w)
    assert (r.prefill_flops, r.decode_flops) == (prefill, decode)
    assert kv.cross_bytes_per_sequence * B == cross_bytes
    assert kv.total_bytes - kv.cross_bytes_per_sequence * B == self_bytes
    assert kv.encoder_seq == config.get("max_source_positions", S_E)


@CONFIGS
def test_training_flops_equal_forward_and_backward(config, tmp_path):
    """A training step: FlopCounterMode over the forward and loss.backward() of the tiny model, against `train`
    (Whisper's first convolution has no input gradient: its mel features need none)."""
    pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    model = _model(config).train()
    enc, dec = _inputs(config, 2)
    with FlopCounterMode(display=False) as counter:
        model(**enc, decoder_input_ids=dec, labels=dec, use_cache=False).loss.backward()
    assert flops(_spec(config, tmp_path), _workload(config)).train_flops == counter.get_total_flops()


def test_whisper_conv_stem_flops_equal_the_convolutions(tmp_path):
    """The audio stem alone: FlopCounterMode's aten.convolution count of the tiny Whisper's forward equals
    encoder/conv1 + encoder/conv2 (2·k·C_in·C_out per output frame)."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    model = _model(WHISPER)
    enc, dec = _inputs(WHISPER, 3)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(**enc, decoder_input_ids=dec)
    conv = sum(v for op, v in counter.get_flop_counts()["Global"].items() if "convolution" in str(op))
    rows = {r.component: r.prefill for r in flops(_spec(WHISPER, tmp_path), _workload(WHISPER)).breakdown}
    assert rows["encoder/conv1"] + rows["encoder/conv2"] == conv == 294_912


def test_whisper_refuses_another_encoder_length():
    r = run_cli("kv", "-p", "whisper-large-v3", "--encoder-seq", "3000")
    assert r.returncode == 2 and "1,500" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_encoder_length_defaults_to_seq_and_leaves_the_decoder_alone():
    """Without `encoder_seq` the encoder reads `seq` tokens; the decoder's own rows do not depend on S_e, and a
    decode step's cross-attention does (S_e keys) while its cache does not grow with it per decoder token."""
    spec = load_preset("t5-small")
    same = flops(spec, Workload(batch=1, seq=64))
    given = flops(spec, Workload(batch=1, seq=64, encoder_seq=64))
    longer = flops(spec, Workload(batch=1, seq=64, encoder_seq=256))
    assert same == given
    rows = {r.component: r for r in longer.breakdown}
    assert all(rows[r.component].prefill == r.prefill for r in same.breakdown if r.component.startswith("attention/"))
    assert longer.decode_flops > same.decode_flops
    short, long = (kv_cache(spec, Workload(batch=1, seq=n, encoder_seq=256)) for n in (64, 4000))
    assert short.cross_bytes_per_sequence == long.cross_bytes_per_sequence


def test_memory_counts_both_caches():
    spec = load_preset("t5-small")
    w = Workload(batch=4, seq=64, encoder_seq=512)
    assert memory(spec, w).kv_cache_bytes == kv_cache(spec, w).total_bytes
    with pytest.raises(UserError, match="training memory"):
        memory(spec, Workload(batch=4, seq=64, train=True))


@pytest.mark.parametrize("command", ["flops", "kv", "memory"])
def test_encoder_seq_is_refused_on_a_decoder(command):
    r = run_cli(command, "-p", "gpt2", "--encoder-seq", "64")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, (r.returncode, r.stderr)
    assert "--encoder-seq" in r.stderr


def test_cli_takes_the_encoder_length():
    r = run_cli("kv", "-p", "t5-small", "--seq", "16", "--encoder-seq", "512", "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["encoder_seq"] == 512 and out["cross_bytes_per_sequence"] == 6 * 512 * 2 * 512 * 2
