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

from llmcalc.costs.kv import kv_bytes, nbytes
from llmcalc.costs.lora import adapter_params, adapter_saved_elements
from llmcalc.costs.params import layer_parts
from llmcalc.costs.params import params as count_params
from llmcalc.errors import UserError
from llmcalc.model.embedding import lm_head_params, token_embedding_params
from llmcalc.model.formats import WeightFormat, WeightFormats
from llmcalc.model.spec import DTYPE_BITS, LayerGroup, ModelSpec
from llmcalc.reports.memory import MemoryReport, MemoryRow
from llmcalc.workload import Workload

FORMULA = ("inference: weights + KV cache + prefill activation peak; "
           "train: weights + gradients + optimizer states (+ fp32 master) + activations of every layer")
QUANTIZED = ("fp8", "int8", "int4")
OPTIMIZER_BYTES = {"adamw": 8, "adamw-8bit": 2, "sgd": 4}
"""Optimizer state bytes per parameter, master weights excluded: Adam m and v in fp32 (8) or 8-bit
(2); SGD momentum in fp32 (4)."""
LOGIT_BYTES = 4
"""Logits are upcast to fp32 for sampling and the loss."""


def stored_bytes(params: int, matrices: list[tuple[int, int]], fmt: WeightFormat, dense: str) -> int:
    """Bytes of one component's `params` parameters with its weight matrices (d_in, d_out) in `fmt`. A plain
    format (fp32, bf16, fp16) stores every parameter at its width; a quantised one stores each matrix as
    fmt.matrix_bytes counts it (codes, scales, zero points, indices: llmcalc/model/formats.py) and the rest of the
    component's parameters (biases, norms) in `dense`."""
    if not fmt.quantized:
        return nbytes(params, fmt.name)
    quantized = sum(d_in * d_out for d_in, d_out in matrices)
    return sum(fmt.matrix_bytes(d_in, d_out, dense) for d_in, d_out in matrices) + nbytes(params - quantized, dense)


def edge_parts(spec: ModelSpec) -> dict[str, tuple[int, list[tuple[int, int]]]]:
    """The parameters outside the layers by component path, with their matrices: the token embedding (a row of d
    per token: d inputs, V outputs), learned positions, the final norm and the LM head (d → V; none when tied)."""
    d, v = spec.d_model, spec.vocab_size
    head = lm_head_params(v, d, tied=spec.tie_embeddings, bias=spec.lm_head_bias)
    return {"embedding/token": (token_embedding_params(v, d), [(d, v)]),
            "embedding/position": (spec.positions.params(spec.max_seq_len, d), []),
            "norms/final": (spec.norm.params(d) if spec.norm.final else 0, []),
            "lm_head": (head, [(d, v)] if head else [])}


def quantized_matrices(spec: ModelSpec, formats: WeightFormats) -> tuple[int, int]:
    """Over every matrix whose component `formats` quantises: their weights N_m and their bytes M in their formats
    (stored_bytes counts the model as M + dense · (N − N_m))."""
    d, weights, stored = spec.d_model, 0, 0
    comps = [(g.count, f"attention/{k}", m) for g in spec.layer_groups() for k, m in spec.attention.matrices(d).items()]
    comps += [(g.count, spec.ffn_prefix(g) + k, m) for g in spec.layer_groups() for k, m in g.ffn.matrices(d).items()]
    comps += [(1, k, m) for k, (_, m) in edge_parts(spec).items()]
    for count, path, mats in comps:
        fmt = formats.of(path)
        if fmt.quantized:
            weights += count * sum(i * o for i, o in mats)
            stored += count * sum(fmt.matrix_bytes(i, o, formats.dense) for i, o in mats)
    return weights, stored


def layer_weight_bytes(spec: ModelSpec, group: LayerGroup, formats: WeightFormats) -> dict[str, int]:
    """Stored bytes of one layer of `group` by component (all GPUs together): its attention and FFN
    matrices in their components' formats (see stored_bytes), its norms as every non-matrix parameter."""
    parts, _ = layer_parts(spec, group)
    d = spec.d_model
    mats = {f"attention/{k}": v for k, v in spec.attention.matrices(d).items()}
    mats |= {spec.ffn_prefix(group) + k: v for k, v in group.ffn.matrices(d).items()}
    return {k: stored_bytes(n, mats.get(k, []), formats.of(k), formats.dense) for k, n in parts.items()}


def weights_bytes(spec: ModelSpec, formats: WeightFormats) -> tuple[int, str]:
    """Bytes of the model's weights (as `llmcalc params` counts them) stored in `formats`, and how."""
    layers = sum(g.count * sum(layer_weight_bytes(spec, g, formats).values()) for g in spec.layer_groups())
    edges = sum(stored_bytes(n, m, formats.of(k), formats.dense) for k, (n, m) in edge_parts(spec).items())
    if not formats.quantized:
        return layers + edges, f"{count_params(spec).total:,} params × {DTYPE_BITS[formats.default] // 8} B"
    label = formats.label
    return layers + edges, label if formats.dense in label else f"{label}; other parameters {formats.dense}"


def layer_activation_bytes(spec: ModelSpec, g: LayerGroup, batch: int, seq: int, w: Workload) -> tuple[int, int]:
    """Bytes one training layer keeps for its backward pass: (linear in S part, attention-core part).

    Generalises Korthikanti et al. 2022 (per layer s·b·h·(34 + 5·a·s/h) for GPT with dropout): the
    inputs of every matmul, Q/K/V, the FFN intermediates, the norm inputs, dropout masks (1 byte), and
    without flash attention the softmax output (plus dropout mask and output) over S×S per head.
    """
    a, d, attn, sb = DTYPE_BITS[w.act_dtype] // 8, spec.d_model, spec.attention, seq * batch
    if w.lora is not None:  # frozen matmuls keep no input; each adapter keeps its r-wide x·A
        saved = (attn.lora_saved_elements(d, w.lora) + g.ffn.lora_saved_elements(d, w.lora)
                 + adapter_saved_elements(spec, g, w))
    else:
        saved = attn.saved_elements(d) + d + g.ffn.saved_elements()  # the FFN's input and its intermediates
    norms = spec.norm.per_layer * d
    linear = a * sb * (saved + norms) + (2 * sb * d if w.dropout else 0)
    window = attn.keys_window(g.window)
    keys = min(seq, window) if (window and w.flash) else seq
    if w.flash:
        core = 4 * batch * attn.heads * seq  # fp32 log-sum-exp per query and head
    else:
        core = batch * attn.heads * seq * keys * (a + (1 + a if w.dropout else 0))
    return linear, core


def memory(spec: ModelSpec, w: Workload) -> MemoryReport:
    """Inference (weights + KV + activations of `batch` sequences of `seq` tokens) or training (+ gradients
    and optimizer states) memory of the whole model; training figures are per data-parallel GPU."""
    batch, seq, dp = w.batch, w.seq, w.layout.dp
    formats = w.formats(spec)
    if w.lora and not w.train:
        raise UserError("`lora_rank`: LoRA adapters are trained; add `train` (inference merges them into the weights)")
    if w.train and formats.quantized and not w.lora:
        raise UserError(f"`weights_dtype`: {formats.label} training is not modelled; use bf16, fp16 or fp32, or "
                        "train LoRA adapters on the quantised base (`lora_rank`)")
    across = next((k for k in ("tp", "pp", "ep") if getattr(w.layout, k) > 1), None)
    if across:
        raise UserError(f"`{across}`: memory is the whole model's (training: per data-parallel GPU); for the "
                        "figures per GPU of a tensor, pipeline or expert split see `llmcalc fit` and `llmcalc latency`")
    if not w.train and (dp > 1 or w.zero or w.micro_batch):
        raise UserError("`dp`: `dp`, `zero` and `micro_batch` describe a training step; add `train` (for serving "
                        "on several GPUs see `llmcalc fit` and `llmcalc latency`)")
    if batch % dp:
        raise UserError(f"`batch`: the global batch of {batch} sequences does not split over `dp` {dp}; "
                        f"use a multiple of {dp}")
    per_gpu = batch // dp
    micro = w.micro_batch or per_gpu
    if per_gpu % micro:
        raise UserError(f"`micro_batch`: {micro} does not divide the {per_gpu} sequences each GPU runs per step "
                        f"(`batch` {batch} / `dp` {dp}); use a divisor of {per_gpu}")
    counts = count_params(spec)
    weights, w_note = weights_bytes(spec, formats)
    rows = []
    trainable, adapters = (counts.total if w.train else 0), 0
    if not w.train:
        kv = kv_bytes(spec, batch, seq, w.kv_dtype)
        act, act_note = inference_activations(spec, batch, seq, w)
        rows += [MemoryRow(component="weights", bytes=weights, note=w_note),
                 MemoryRow(component="kv_cache", bytes=kv, note=f"{batch} × {seq} tokens in {w.kv_dtype}"),
                 MemoryRow(component="activations", bytes=act, note=act_note)]
        grads = opt = 0
    else:
        kv = 0
        act, act_note = training_activations(spec, micro, seq, w)
        shard = lambda x, stage: -(-x // dp) if w.zero >= stage else x  # noqa: E731
        split = lambda stage: f" ÷ {dp} (ZeRO-{w.zero})" if w.zero >= stage else ""  # noqa: E731
        weights = shard(weights, 3)
        if w.lora:  # the base frozen in its formats; the adapters trained in the dense dtype
            trainable, dtype = sum(adapter_params(spec, w).values()), formats.dense
            adapters = shard(nbytes(trainable, dtype), 3)
            w_note = "frozen base: " + w_note
        else:
            trainable, dtype = counts.total, w.weights_dtype
        grads = shard(nbytes(trainable, dtype), 2)
        master = 4 * trainable if dtype != "fp32" else 0
        opt = shard(master + OPTIMIZER_BYTES[w.optimizer] * trainable, 1)
        what = f"LoRA adapters' {dtype} gradients" if w.lora else f"{dtype} gradients"
        rows += [MemoryRow(component="weights", bytes=weights, note=w_note + split(3))]
        if w.lora:
            rows.append(MemoryRow(component="adapters", bytes=adapters,
                                  note=f"LoRA rank {w.lora_rank} on {','.join(w.lora_targets)}: {trainable:,} "
                                       f"params × {DTYPE_BITS[dtype] // 8} B ({dtype})" + split(3)))
        rows += [MemoryRow(component="gradients", bytes=grads, note=what + split(2)),
                 MemoryRow(component="optimizer", bytes=opt,
                           note=(f"{w.optimizer}: fp32 master + states" if master else w.optimizer)
                           + (" of the adapters" if w.lora else "") + split(1)),
                 MemoryRow(component="activations", bytes=act, note=act_note)]
    dominant = max(rows, key=lambda r: r.bytes).component
    notes = []
    if w.train:
        notes.append(f"`batch` {batch} is the global batch: each of the {dp} data-parallel GPU(s) runs {per_gpu} "
                     f"sequence(s) per step, {micro} at a time" + (f" ({per_gpu // micro} micro-batches)"
                                                                    if micro < per_gpu else ""))
    if w.zero and dp == 1:
        notes.append(f"ZeRO-{w.zero} over one GPU (`dp` 1) divides nothing; give `dp`, the data-parallel GPUs")
    elif w.zero:
        notes.append(f"ZeRO-{w.zero} over {dp} data-parallel GPUs: figures are per GPU")
    return MemoryReport(
        model=spec.name, mode="train" if w.train else "inference", batch=batch, seq=seq, dp=dp,
        per_gpu_batch=per_gpu, micro_batch=micro,
        weights_bytes=weights, kv_cache_bytes=kv, activation_bytes=act, gradient_bytes=grads, optimizer_bytes=opt,
        trainable_params=trainable, adapter_bytes=adapters, lora_rank=w.lora_rank,
        lora_targets=list(w.lora_targets) if w.lora else [],
        total_bytes=sum(r.bytes for r in rows), dominant=dominant, breakdown=rows,
        formula=FORMULA, notes=notes,
    )


def layer_peak_per_token(spec: ModelSpec, seq: int, w: Workload) -> tuple[int, str]:
    """Bytes per token a prefill of `seq` tokens holds at its largest layer stage, beyond the residual stream
    and the normed input: the larger of the attention's and the FFN's own peak, in the layer group where it
    is largest, and which one it is. A parallel block (one norm) holds the attention's output (d) while its
    FFN runs. Without flash attention the attention also holds its scores and probabilities, 2·H·keys."""
    a, d, attn = DTYPE_BITS[w.act_dtype] // 8, spec.d_model, spec.attention
    rope = spec.positions.rotary
    best, what = 0, ""
    for g in spec.layer_groups():
        stage = attn.prefill_activation_bytes(d, seq, g.window, a, rope, spec.norm.qk_norm)
        if not w.flash:
            window = attn.keys_window(g.window)
            stage += 2 * a * attn.heads * (min(seq, window) if window else seq)
        ffn = g.ffn.prefill_activation_bytes(d, a) + (a * d if spec.norm.parallel else 0)
        for name, per_token in (("attention", stage), ("ffn", ffn)):
            if per_token > best:
                best, what = per_token, name
    return best, what


def peak_key(spec: ModelSpec, w: Workload) -> Callable[[int], tuple]:
    """seq ↦ what layer_peak_per_token depends on `seq` through: each window's attention activation_key, and
    seq itself without flash attention (the scores are seq wide). Equal keys, equal peaks."""
    windows = dict.fromkeys(g.window for g in spec.layer_groups())
    keys = [partial(spec.attention.activation_key, window=win) for win in windows]
    if not w.flash:
        keys.append(lambda seq: seq)
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
        a, d, attn = DTYPE_BITS[w.act_dtype] // 8, spec.d_model, spec.attention
        self.residual, self.head_token = 2 * a * d, a * d
        self.head_seq = a * d + (a + LOGIT_BYTES) * spec.vocab_size
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


def training_activations(spec: ModelSpec, batch: int, seq: int, w: Workload) -> tuple[int, str]:
    """Bytes a training step keeps for the backward pass (every layer under the recompute mode, + fp32 logits) for
    `batch` sequences of `seq` tokens, and how; under LoRA (`lora_targets` may be empty: the frozen base alone)."""
    a, d = DTYPE_BITS[w.act_dtype] // 8, spec.d_model
    per_group = [(g.count, *layer_activation_bytes(spec, g, batch, seq, w)) for g in spec.layer_groups()]
    if w.recompute == "full":  # keep each layer's input; recompute one layer at a time
        kept = spec.n_layers * a * seq * batch * d + max(lin + core for _, lin, core in per_group)
    elif w.recompute == "selective":  # drop the attention core's S×S tensors, recompute them
        kept = sum(n * lin for n, lin, _ in per_group) + max(core for _, _, core in per_group)
    else:
        kept = sum(n * (lin + core) for n, lin, core in per_group)
    logits = LOGIT_BYTES * batch * seq * spec.vocab_size
    kernel = "flash" if w.flash else "no flash"
    lora = ", inputs of frozen matmuls not kept" if w.lora else ""
    return kept + logits, f"{spec.n_layers} layers, recompute {w.recompute}, {kernel}{lora}, + fp32 logits"
