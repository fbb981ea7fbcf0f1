"""Memory: weights, KV cache, activations, gradients, optimizer states. See docs/formulas.md#memory.

Weights: each component (embedding, attention, FFN, experts, router, norms, head) in its format
(llmcalc/model/formats.py: codes, scales, zero points, indices). `--weights-dtype` fp8, int8, int4 quantise
the transformer layers' matrices and keep the token embedding, LM head and norms in bf16, as weight-only
quantizers (GPTQ, AWQ, bitsandbytes) do; int4 adds one fp16 scale per group.
Training (mixed precision): bf16 weights and gradients, fp32 master weights and optimizer states;
ZeRO stage 1/2/3 divides optimizer / +gradients / +weights by the data-parallel size.
LoRA (docs/formulas.md#lora): the base frozen in its format (quantised allowed: QLoRA), the adapters in the
dense dtype with their gradients, fp32 master and optimizer states; activations without the inputs that only
frozen matmuls read (autograd keeps a frozen F.linear's weight, never its input), plus each adapter's r-wide
intermediate.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from llmcalc.costs.kv import kv_bytes
from llmcalc.costs.train_memory import FORMULA, LOGIT_BYTES, training_memory
from llmcalc.costs.weights import formats_label, weights_bytes
from llmcalc.errors import UserError
from llmcalc.model.spec import DTYPE_BITS, ModelSpec, dtype_bytes
from llmcalc.reports.memory import MemoryReport, MemoryRow
from llmcalc.workload import Workload


def memory(spec: ModelSpec, w: Workload, chunked: bool = False) -> MemoryReport:
    """Inference (weights + KV + activations of `batch` sequences of `seq` tokens, the whole model) or training
    (+ gradients and optimizer states; the most-loaded GPU of the layout: llmcalc/costs/train_memory.py).
    Inference activations: one prefill of the whole batch at once, or with `chunked` one chunk of `prefill_chunk`
    tokens, as a server prefills (and `llmcalc fit` sizes its workspace); the other is named in a note."""
    spec = w.sized(spec)  # cross-attention layers read the workload's images (Workload.sized)
    batch, seq, dp = w.batch, w.seq, w.layout.dp
    spec.stack.check_sized("memory")
    formats = w.formats(spec)
    if w.lora and not w.train:
        raise UserError("`lora_rank`: LoRA adapters are trained; add `train` (inference merges them into the weights)")
    if w.train and formats.quantized and not w.lora:
        raise UserError(f"`weights_dtype`: training quantised weights ({formats_label(spec, formats)}) is not "
                        "modelled; use bf16, fp16 or fp32, or train LoRA adapters on the quantised base (`lora_rank`)")
    enc_seq = spec.stack.encoder_length(w.encoder_seq, seq)
    if w.train and enc_seq:
        spec.stack.check_modelled("training memory")
    if w.train and w.images:
        raise UserError("`images`: training memory of a vision tower is not modelled; drop `images` (inference "
                        "memory counts them)")
    if w.train:
        return training_memory(spec, w)
    layout = w.layout
    across = next((k for k in ("tp", "pp", "ep", "cp") if getattr(layout, k) > 1), None)
    if across:
        raise UserError(f"`{across}`: inference memory is the whole model's; for the figures per GPU of a tensor, "
                        "pipeline or expert split see `llmcalc fit` and `llmcalc latency` (training: add `train`)")
    if dp > 1 or w.zero or w.micro_batch:
        given = "dp" if dp > 1 else "zero" if w.zero else "micro_batch"
        raise UserError(f"`{given}`: `dp`, `zero` and `micro_batch` describe a training step; add `train` (for "
                        "serving on several GPUs see `llmcalc fit` and `llmcalc latency`)")
    weights, w_note = weights_bytes(spec, formats)
    kv = kv_bytes(spec, batch, seq, w.kv_dtype) + spec.stack.cross_cache_bytes(spec, batch, enc_seq,
                                                                               DTYPE_BITS[w.kv_dtype])
    whole, whole_note = inference_activations(spec, batch, seq, w)
    chunk = min(w.prefill_chunk, batch * seq)
    part, part_note = inference_activations(spec, 1, chunk, w)
    act, act_note = (part, f"{part_note}, one chunk of {chunk:,} tokens") if chunked else (whole, whole_note)
    other = (f"activations of one unchunked prefill of all {batch:,} × {seq:,} tokens: {whole / 1e9:,.1f} GB"
             if chunked else f"activations are one prefill of all {batch:,} × {seq:,} tokens at once; a server "
             f"prefilling in chunks of {chunk:,} tokens (`prefill_chunk`, as `llmcalc fit` sizes it) needs "
             f"{part / 1e9:,.1f} GB") if part != whole and not enc_seq else None
    if enc_seq:
        act, act_note = encoder_decoder_activations(spec, batch, enc_seq, w, act, act_note)
    tower, image_kv, kv_note = image_memory(spec, w)
    if tower > act:
        act, act_note = tower, f"vision tower peak: {batch:,} × {w.images} images encoded together"
    if enc_seq:
        kv_note += f", + the cross-attention cache of {enc_seq:,} encoder positions"
    rows = [MemoryRow(component="weights", bytes=weights, note=w_note),
            MemoryRow(component="kv_cache", bytes=kv, note=f"{batch:,} × {seq:,} tokens in {w.kv_dtype}" + kv_note),
            MemoryRow(component="activations", bytes=act, note=act_note)]
    return MemoryReport(
        model=spec.name, mode="inference", batch=batch, seq=seq, dp=dp, per_gpu_batch=batch, micro_batch=batch,
        weights_bytes=weights, kv_cache_bytes=kv, activation_bytes=act, gradient_bytes=0, optimizer_bytes=0,
        total_bytes=sum(r.bytes for r in rows), dominant=max(rows, key=lambda r: r.bytes).component, breakdown=rows,
        formula=FORMULA, notes=([f"vision tower peak {tower:,} B for {batch:,} × {w.images} image(s) encoded together; "
                                 "activations are the larger of it and the language model's prefill peak"]
                                if w.images else []) + ([other] if other else []), images=w.images, vision_activation_bytes=tower, image_kv_bytes=image_kv,
    )


def image_memory(spec: ModelSpec, w: Workload) -> tuple[int, int, str]:
    """(the vision tower's activation peak for the batch's images, the image tokens' bytes of the KV cache, a note
    for the cache row); zeros without images. Activations are the larger of the tower's peak and the language
    model's prefill peak: the tower finishes before the language model's first layer."""
    from llmcalc.costs.kv import kv_cache
    from llmcalc.costs.vision import tower_activation_bytes

    tower = tower_activation_bytes(spec, w, w.batch)
    if not w.images:
        return tower, 0, ""
    kv = kv_cache(spec, w)
    if cross := w.cross_image_tokens(spec):  # read by cross-attention layers from a cache of their own
        return tower, 0, (f"; {w.images} image(s) × {cross // w.images:,} tokens in the cross-attention layers hold "
                          f"{kv.state_bytes_per_sequence * w.batch:,} B")
    image_kv = kv.image_bytes
    return tower, image_kv, f"; {w.images} image(s) × {w.image_tokens(spec) // w.images:,} tokens hold {image_kv:,} B"


def layer_peak_per_token(spec: ModelSpec, seq: int, w: Workload) -> tuple[int, str]:
    """Bytes per token a prefill of `seq` tokens holds at its largest layer stage, beyond the residual stream
    and the normed input: the larger of the attention's and the FFN's own peak, in the layer group where it
    is largest, and which one it is (a hybrid's mixer by its path: attention, mamba). A parallel block (one norm)
    holds the attention's output (d) while its FFN runs. Without flash attention the attention also holds its
    scores and probabilities, 2·H·keys (unfused_score_elements: a recurrent mixer has none)."""
    a, d = dtype_bytes(w.act_dtype), spec.d_model
    rope = spec.positions.rotary
    best, what = 0, ""
    for g in spec.layer_groups():
        attn, stage = g.mixer, 0  # a layer without a mixer (a hybrid's MLP layer): its FFN alone
        if attn is not None:
            stage = attn.prefill_activation_bytes(d, seq, g.window, a, rope, spec.norm.qk_norm)
            if not w.flash:
                stage += 2 * a * attn.unfused_score_elements(seq, g.window)
        ffn = g.ffn.prefill_activation_bytes(d, a) + (a * d if spec.norm.parallel else 0)
        for name, per_token in ((g.mixer_name, stage), ("ffn", ffn)):
            if per_token > best:
                best, what = per_token, name
    return best, what


def peak_key(spec: ModelSpec, w: Workload) -> Callable[[int], tuple]:
    """seq ↦ what layer_peak_per_token depends on `seq` through: each mixer's activation_key per window, and
    seq itself without flash attention (the scores are seq wide). Equal keys, equal peaks."""
    mixers = dict.fromkeys((g.mixer, g.window) for g in spec.layer_groups() if g.mixer is not None)
    keys = [partial(attn.activation_key, window=win) for attn, win in mixers]
    if not w.flash:
        keys.append(lambda seq: seq)
    if not keys:  # no mixer at all: the peak does not depend on seq
        return lambda seq: None
    if len(keys) == 1:
        return keys[0]
    if len(keys) == 2:
        first, second = keys
        return lambda seq: (first(seq), second(seq))
    return lambda seq: tuple(k(seq) for k in keys)


class PrefillPeak:
    """The prefill's activation peak (docs/formulas.md#inference-peak) of a model under the options, for any
    batch and seq: the residual stream and the normed input (2·a·d per token) plus the largest layer stage
    (layer_peak_per_token), or at the head the residual stream, the last positions' normed input and their
    logits, in the activation dtype and upcast to fp32 for sampling (B·(a·d + (a + 4)·V)); plus the tables
    kept per position for the whole forward: the positions (int64) and RoPE's cos and sin (2·a·d_rot)."""

    def __init__(self, spec: ModelSpec, w: Workload):
        a, d, attn = dtype_bytes(w.act_dtype), spec.d_model, spec.attention
        self.residual, self.head_token = 2 * a * d, a * d
        self.head_seq = a * d + (a + LOGIT_BYTES) * spec.vocab_size * spec.stack.lm_head  # an encoder: no logits
        self.tables = 8 + (2 * a * (attn.rope_dim - attn.rope_dim % 2) if spec.positions.rotary else 0)

    def __call__(self, batch: int, seq: int, per_token: int) -> tuple[int, bool]:
        """Bytes at the peak, given the layer stage's bytes per token, and whether the head is the peak."""
        tokens = batch * seq
        layer = tokens * (self.residual + per_token)
        head = self.head_token * tokens + batch * self.head_seq
        return seq * self.tables + max(layer, head), head > layer


def inference_activations(spec: ModelSpec, batch: int, seq: int, w: Workload) -> tuple[int, str]:
    """PrefillPeak of `batch` sequences of `seq` tokens, and what sets it."""
    per_token, what = layer_peak_per_token(spec, seq, w)
    total, at_head = PrefillPeak(spec, w)(batch, seq, per_token)
    return total, "prefill peak: residual + " + ("logits" if at_head else what)


def encoder_decoder_activations(spec: ModelSpec, batch: int, encoder_seq: int, w: Workload, decoder: int,
                                decoder_note: str) -> tuple[int, str]:
    """An encoder-decoder's inference activation peak: the larger of the encoder's forward over S_e tokens (the
    residual stream and normed input 2·a·d per token, plus its largest layer stage, layer_peak_per_token; the
    position table of S_e rows) and the decoder's prefill peak (`decoder`) while the encoder output it reads,
    B·S_e·a·d, is still held; or an input stem's peak (Whisper's convolutions: Stack.stem_elements). The
    cross-attention K/V are in the cache, not here."""
    a, d = dtype_bytes(w.act_dtype), spec.d_model
    per_token, what = layer_peak_per_token(spec, encoder_seq, w)
    tables = 8 + (2 * a * (spec.attention.rope_dim - spec.attention.rope_dim % 2) if spec.positions.rotary else 0)
    encoder = batch * encoder_seq * (2 * a * d + per_token) + encoder_seq * tables
    stem = batch * a * spec.stack.stem_elements(encoder_seq, d)
    held = batch * encoder_seq * a * d
    if stem > max(encoder, decoder + held):
        return stem, f"audio stem ({2 * encoder_seq:,} frames): features, convolution output and its GELU"
    if encoder >= decoder + held:
        return encoder, f"encoder forward peak ({encoder_seq:,} tokens): residual + {what}"
    return decoder + held, decoder_note + f", + the encoder output ({encoder_seq:,} positions)"
