"""Training memory of the most-loaded GPU of a Megatron layout. See docs/formulas.md#training-memory-per-gpu.

A layout (llmcalc/workload.py: Layout) of gpus = tp · pp · dp · cp runs a global batch of B sequences of S tokens:
each data-parallel replica B / dp of them, as m = B / (dp · b) micro-batches of b sequences.

  1. Parameters of one GPU of pipeline stage r: its layers (L / pp; uneven, Layout.stage_layers: the first and
     last stages' given counts and the rest shared evenly, or by default the first L mod pp stages one layer more;
     interleaved, pp · vpp chunks of L / (pp · vpp) layers, stage r holding chunks r, r + pp, ...); in each,
     every matrix split over the ranks the variant names (tp_shards: tp, a kv head over min(tp, H_kv), routed
     experts whole over ep, the router and norms whole); the token embedding (vocab-split over tp) and learned
     positions (whole) on the first stage, the LM head (vocab-split; a tied head is a copy when pp > 1) and the
     final norm on the last.
  2. Bytes per parameter, mixed precision: weights in the weights dtype, gradients in grad_dtype (default: the
     weights'; Megatron keeps fp32 main gradients), an fp32 master copy (unless fp32 weights) and the optimizer
     states (OPTIMIZER_BYTES). ZeRO stage 1/2/3 divides optimizer / + gradients / + weights over the data-parallel
     group dp · cp (Megatron's distributed optimizer shards over dp with context parallelism), and the routed
     experts over their own data-parallel group, tp · dp · cp / ep (ep > 1; else dp · cp).
  3. Activations per layer and micro-batch (layer_activation_parts; Korthikanti et al. 2022, Table 2), on
     s = S / cp tokens per rank: the whole part (10·s·b·h for GPT) on every tensor-parallel rank, ÷ tp with sequence
     parallelism; the split part and the attention core ÷ tp. Recompute none keeps all; selective keeps all but
     the core, rebuilt one layer at a time; full keeps the layer's input (2·s·b·h, ÷ tp with sp) and rebuilds one
     layer at a time. The stage's largest rebuilt layer is added once.
  4. In flight: 1F1B stage r holds min(pp − r, m) micro-batches' activations of its layers; interleaved (vpp ≥ 2,
     Megatron's schedule with groups of pp micro-batches) min(2·(pp − r − 1) + (vpp − 1)·pp + 1, m·vpp) chunk
     passes, pass k of chunk (k // pp) mod vpp: on the first stage (vpp·pp + pp − 1) · L / (pp · vpp) layers' worth,
     L·(1 + (pp − 1)/(pp·vpp)) (Korthikanti §4.2.3; Megatron's theoretical_memory_usage.py).
  5. The last stage adds the fp32 logits of one micro-batch, vocab-split: 4·b·s·V / tp.

The most-loaded GPU is the stage with the largest total (the first, almost always: it holds the most micro-batches);
its figures are reported. Not counted: the embedding's input ids and dropout mask and the final norm's and the
head's inputs (Megatron's estimate adds 8·s·b·pp + s·b·h·pp and, at pp 1, 4·s·b·h), communication buffers,
vocabulary padding, the allocator, MTP modules.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from llmcalc.costs.kv import nbytes
from llmcalc.costs.lora import adapter_params, adapter_saved_elements, stage_adapter_params
from llmcalc.costs.params import layer_parts
from llmcalc.costs.params import params as count_params
from llmcalc.costs.shard import stage_weight_bytes
from llmcalc.costs.weights import tower_params, weights_bytes
from llmcalc.errors import UserError
from llmcalc.model.embedding import lm_head_params, token_embedding_params
from llmcalc.model.spec import LayerGroup, ModelSpec, dtype_bytes
from llmcalc.model.units import ceil_div
from llmcalc.reports.memory import MemoryReport, MemoryRow
from llmcalc.workload import Layout, Workload

FORMULA = ("inference: weights + KV cache + prefill activation peak; "
           "train: weights + gradients + optimizer states (+ fp32 master) + activations of every layer")
OPTIMIZER_BYTES = {"adamw": 8, "adamw-8bit": 2, "sgd": 4}
"""Optimizer state bytes per parameter, master weights excluded: Adam m and v in fp32 (8) or 8-bit
(2); SGD momentum in fp32 (4)."""
LOGIT_BYTES = 4
"""Logits are upcast to fp32 for sampling and the loss."""


def layer_activation_parts(spec: ModelSpec, g: LayerGroup, batch: int, seq: int, w: Workload,
                           tp: int) -> tuple[int, int, int]:
    """Bytes one training layer keeps for its backward pass on one of `tp` tensor-parallel ranks, for `batch`
    sequences of `seq` tokens (Korthikanti et al. 2022, §4.1): (the part every rank keeps whole, its share of the
    part split by head, its share of the attention core).

    Generalises the paper's GPT layer, s·b·h·(34 + 5·a·s/h) at tp 1 with dropout and no flash: the inputs of
    every matmul, Q/K/V, the FFN intermediates, the norms' inputs, the dropout masks (1 byte each) and, without
    flash attention, the softmax output (and its dropout mask and output) over S×S per head. Whole: the norms'
    inputs, the attention's and the FFN's inputs, the dropout masks and what a variant keeps unsplit (MLA's
    latents, an MoE's router logits): 10·s·b·h for GPT. Split: the rest (24·s·b·h for GPT) and the core. That is
    what fused kernels keep; eager PyTorch ops (`fusion`) keep more: the norms' own (Norm.eager_saved_bytes,
    whole) and the activation's and the copied K/V's (eager_saved_elements of the FFN and the attention, split as
    the heads)."""
    a, d, attn, sb = dtype_bytes(w.act_dtype), spec.d_model, g.mixer, seq * batch
    # a hybrid's layer without a mixer (Nemotron-H's MLP layers) keeps its FFN's alone
    if w.lora is not None:  # frozen matmuls keep no input; each adapter keeps its r-wide x·A (docs/formulas.md#lora)
        saved = ((attn.lora_saved_elements(d, w.lora) if attn else 0) + g.ffn.lora_saved_elements(d, w.lora)
                 + adapter_saved_elements(spec, g, w))
    else:  # the FFN's input and its intermediates
        saved = (attn.saved_elements(d) if attn else 0) + d + g.ffn.saved_elements()
    norms = spec.norm.per_layer * d
    linear = a * sb * (saved + norms) + (2 * sb * d if w.dropout else 0)
    unsplit = a * sb * ((attn.tp_saved_elements(d, 1) if attn else 0) + g.ffn.tp_saved_elements(1))
    split = a * sb * ((attn.tp_saved_elements(d, tp) if attn else 0) + g.ffn.tp_saved_elements(tp))
    if w.fusion == "eager":  # PyTorch's own ops keep more (Norm, FFN and Attention: eager_saved_*)
        heads = (attn.eager_saved_elements() if attn else 0) + g.ffn.eager_saved_elements()  # split as the heads
        linear += sb * (norms * spec.norm.eager_saved_bytes() + a * heads)
        unsplit += a * sb * heads
        split += a * sb * ceil_div(heads, tp)
    core = attn.saved_core_bytes(batch, seq, g.window, tp, a, w.flash, w.dropout) if attn else 0
    return linear - unsplit, split, core


def layer_activation_bytes(spec: ModelSpec, g: LayerGroup, batch: int, seq: int, w: Workload) -> tuple[int, int]:
    """Bytes one training layer keeps for its backward pass without parallelism: (linear in S part, attention-core
    part); s·b·h·34 and 5·a·s²·b for a GPT layer with dropout and no flash (layer_activation_parts)."""
    whole, split, core = layer_activation_parts(spec, g, batch, seq, w, tp=1)
    return whole + split, core


def kept_per_layer(spec: ModelSpec, g: LayerGroup, micro: int, tokens: int, w: Workload) -> tuple[int, int]:
    """(Bytes one layer of `g` keeps per micro-batch on one GPU until its backward, bytes its recompute rebuilds
    for the while of its backward) under the workload's recompute mode and layout (Korthikanti et al. 2022,
    Table 2), for `micro` sequences of `tokens` tokens on the GPU."""
    layout = w.layout
    whole, split, core = layer_activation_parts(spec, g, micro, tokens, w, layout.tp)
    if layout.sp:
        whole //= layout.tp  # the sequence is split over tp: check_parallel_training makes tokens a multiple of tp
    if w.recompute == "full":
        a = dtype_bytes(w.act_dtype)
        return a * micro * tokens * spec.d_model // (layout.tp if layout.sp else 1), whole + split + core
    if w.recompute == "selective":
        return whole + split, core
    return whole + split + core, 0


def chunk_layers(spec: ModelSpec, layout: Layout, stage: int) -> list[tuple[int, int]]:
    """The layer ranges [start, stop) of the model chunks pipeline stage `stage` holds (Layout.stage_chunks): its
    one range under 1F1B (L / pp layers, or the uneven split), or its vpp chunks stage, stage + pp, ...
    (interleaved)."""
    return list(_stage_chunks(layout, spec.n_layers)[stage])


@lru_cache(maxsize=16)
def _stage_chunks(layout: Layout, n_layers: int) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Layout.stage_chunks, worked out once per layout and depth: every stage's chunks, asked of each stage in turn,
    would otherwise cost pp² (0.1 s at pp 512)."""
    return tuple(tuple(chunks) for chunks in layout.stage_chunks(n_layers))


def passes_in_flight(layout: Layout, stage: int, micro_batches: int) -> list[int]:
    """How many forward passes of each of its chunks stage `stage` holds activations of at its peak, with
    `micro_batches` micro-batches per step. 1F1B: min(pp − stage, m) of its one chunk. Interleaved (Megatron's
    get_pp_rank_microbatches and schedule table, micro-batches in groups of pp): the warm-up 2·(pp − stage − 1)
    + (vpp − 1)·pp passes and one more, or all m·vpp when that is fewer; pass k runs chunk (k // pp) mod vpp."""
    p, v, m = layout.pp, layout.vpp, micro_batches
    if v == 1:
        return [min(p - stage, m)]
    warm = 2 * (p - stage - 1) + (v - 1) * p
    n = m * v if warm >= m * v else warm + 1
    cycles, rest = divmod(n, p * v)
    return [cycles * p + min(p, max(0, rest - j * p)) for j in range(v)]


def rank_params(spec: ModelSpec, layout: Layout, stage: int) -> tuple[int, int]:
    """Parameters one GPU of pipeline stage `stage` holds: (all but the routed experts, the routed experts)."""
    dense = expert = 0
    tp, ep = layout.tp, layout.ep
    for start, stop in chunk_layers(spec, layout, stage):
        for g in spec.layer_groups(start, stop):
            prefix, mixer = spec.ffn_prefix(g), f"{g.mixer_name}/"
            for key, n in layer_parts(spec, g)[0].items():
                if g.mixer is not None and key.startswith(mixer):
                    shards = g.mixer.tp_shards(key.removeprefix(mixer), tp)
                elif key.startswith(prefix):
                    shards = g.ffn.tp_shards(key.removeprefix(prefix), tp, ep)
                else:  # the norms: every rank holds them whole
                    shards = 1
                if g.ffn.routed_experts and key == prefix + "experts":
                    expert += g.count * ceil_div(n, shards)
                else:
                    dense += g.count * ceil_div(n, shards)
    d, v = spec.d_model, spec.vocab_size
    if stage == 0:
        dense += ceil_div(token_embedding_params(spec.embedding_rows, d), tp)
        dense += spec.positions.params(spec.max_seq_len, d, spec.attention)
        dense += sum(spec.stack.embedding_params(d, spec.norm).values())  # an encoder's: every rank whole
        dense += sum(spec.stack.extra_params(spec).values())
        dense += ceil_div(tower_params(spec), tp)  # a VLM's image encoder and projector, trained with the model
    if stage == layout.pp - 1:
        head = lm_head_params(v, d, tied=spec.tie_embeddings and layout.pp == 1, bias=spec.lm_head_bias)
        dense += ceil_div(head, tp) + (spec.norm.params(d) if spec.norm.final else 0)
        dense += sum(spec.stack.head_params(d).values())
    return dense, expert


@dataclass(frozen=True)
class RankMemory:
    """What one GPU of a pipeline stage holds, bytes."""

    stage: int
    params: int
    weights: int
    adapters: int
    """LoRA: the adapters' weights (0 without LoRA)."""
    gradients: int
    optimizer: int
    activations: int
    per_layer: int
    """The largest layer's kept bytes, per micro-batch."""
    passes: list[int]
    """Forward passes in flight per model chunk."""
    layers: int
    tokens: int
    """Tokens of each sequence on the GPU, seq / cp."""

    @property
    def total(self) -> int:
        return self.weights + self.adapters + self.gradients + self.optimizer + self.activations


def rank_memory(spec: ModelSpec, w: Workload, stage: int, micro: int, micro_batches: int) -> RankMemory:
    """The memory of one GPU of pipeline stage `stage` (docstring of this module)."""
    layout = w.layout
    dense, expert = rank_params(spec, layout, stage)
    n = dense + expert
    group = layout.dp * layout.cp
    groups = {group: dense}
    expert_group = layout.tp * group // layout.ep if layout.ep > 1 else group
    groups[expert_group] = groups.get(expert_group, 0) + expert

    dtype, adapters = train_dtype(spec, w), 0
    if w.lora:  # the stage's base frozen in its formats, only its adapters trained, split over tp as their matrices
        trained = ceil_div(stage_adapter_params(spec, w, chunk_layers(spec, layout, stage)), layout.tp)
        base = stage_weight_bytes(spec, w, stage)
        if stage == 0:  # a VLM's tower, frozen in the dense dtype (quantisers leave it as it was)
            base += ceil_div(nbytes(tower_params(spec), w.formats(spec).dense), layout.tp)
        weights = ceil_div(base, group) if w.zero >= 3 else base
        adapters = ceil_div(nbytes(trained, dtype), group) if w.zero >= 3 else nbytes(trained, dtype)
        groups = {group: trained}
    else:
        trained = n

    def sharded(per_param, from_stage: int) -> int:  # bytes of the trained params, divided over ZeRO's groups
        if w.zero < from_stage:
            return per_param(trained)
        return sum(ceil_div(per_param(k), g) for g, k in groups.items())

    if not w.lora:
        weights = sharded(lambda k: nbytes(k, dtype), 3)
    master = 4 if dtype != "fp32" else 0
    gradients = sharded(lambda k: nbytes(k, w.grad_dtype or dtype), 2)
    optimizer = sharded(lambda k: (master + OPTIMIZER_BYTES[w.optimizer]) * k, 1)

    tokens = w.seq // layout.cp
    passes = passes_in_flight(layout, stage, micro_batches)
    kept = rebuilt = per_layer = layers = 0
    for (start, stop), count in zip(chunk_layers(spec, layout, stage), passes):
        for g in spec.layer_groups(start, stop):
            keep, rebuild = kept_per_layer(spec, g, micro, tokens, w)
            kept += count * g.count * keep
            rebuilt, per_layer = max(rebuilt, rebuild), max(per_layer, keep)
            layers += g.count
    last = stage == layout.pp - 1 and spec.stack.lm_head  # an encoder makes no logits
    logits = ceil_div(LOGIT_BYTES * micro * tokens * spec.vocab_size, layout.tp) if last else 0
    return RankMemory(stage=stage, params=dense + expert, weights=weights, adapters=adapters, gradients=gradients,
                      optimizer=optimizer,
                      activations=kept + rebuilt + logits, per_layer=per_layer, passes=passes, layers=layers,
                      tokens=tokens)


def train_dtype(spec: ModelSpec, w: Workload) -> str:
    """The type trained parameters are held in: the weights dtype, or the dense dtype of the formats given (a
    LoRA base in a quantised format trains its adapters in it)."""
    return w.formats(spec).dense if w.formats_given(spec) else w.weights_dtype


def check_parallel_training(spec: ModelSpec, w: Workload, micro_batches: int) -> None:
    """The layout must divide the model, the batch and the sequence: Layout.check, cp dividing seq, sp's tokens
    per GPU dividing over tp, flash attention under cp, whole groups of pp micro-batches when interleaved."""
    layout, seq = w.layout, w.seq
    layout.check(spec, w.batch, uneven=True)
    if seq % layout.cp:
        raise UserError(f"`cp`: {layout.cp} does not divide `seq` {seq}; use a divisor of {seq}")
    if layout.cp > 1 and not w.flash:
        raise UserError("`cp`: context parallelism runs ring flash attention, which keeps no S×S scores; "
                        "give `flash` or drop `cp`")
    if layout.sp and (seq // layout.cp) % layout.tp:
        raise UserError(f"`sp`: sequence parallelism splits each GPU's {seq // layout.cp} tokens over `tp` "
                        f"{layout.tp}; use a `seq` that is a multiple of tp · cp = {layout.tp * layout.cp}")
    if layout.vpp > 1 and micro_batches % layout.pp:
        raise UserError(f"`micro_batch`: the interleaved schedule runs micro-batches in groups of `pp` "
                        f"{layout.pp}, and each GPU runs {micro_batches} per step (batch / dp / micro-batch); "
                        f"make that a multiple of {layout.pp}")


def check_training_layout(spec: ModelSpec, w: Workload) -> None:
    """What a training step is modelled over beyond the layout's own checks (the same for its memory and its
    time): LoRA over tp, pp and dp only, context parallelism over attention layers with 2·cp chunks of each
    sequence (the load-balanced ring)."""
    L = w.layout
    if w.lora and (L.cp > 1 or L.ep > 1):
        across = "cp" if L.cp > 1 else "ep"
        raise UserError(f"`{across}`: LoRA training is modelled over tp, pp and dp (`zero`); drop `{across}`")
    if L.cp > 1 and spec.hybrid:
        raise UserError("`cp`: context parallelism of a hybrid's recurrent layers is not modelled; drop `cp`")
    if L.cp > 1 and w.seq % (2 * L.cp):
        raise UserError(f"`cp`: the load-balanced ring splits each sequence into 2 · cp = {2 * L.cp} chunks; use "
                        f"a `seq` that is a multiple of {2 * L.cp}")


def training_memory(spec: ModelSpec, w: Workload) -> MemoryReport:
    """Memory of the most-loaded GPU in a training step under the workload's layout (this module's docstring)."""
    check_training_layout(spec, w)
    layout, batch, seq = w.layout, w.batch, w.seq
    dp = layout.dp
    if batch % dp:
        raise UserError(f"`batch`: the global batch of {batch} sequences does not split over `dp` {dp}; "
                        f"use a multiple of {dp}")
    per_gpu = batch // dp
    micro = w.micro_batch or per_gpu
    if per_gpu % micro:
        raise UserError(f"`micro_batch`: {micro} does not divide the {per_gpu} sequences each GPU runs per step "
                        f"(`batch` {batch} / `dp` {dp}); use a divisor of {per_gpu}")
    m = per_gpu // micro
    check_parallel_training(spec, w, m)
    trivial = layout.tp == layout.pp == layout.cp == layout.ep == 1
    if w.lora and (layout.cp > 1 or layout.ep > 1):
        across = "cp" if layout.cp > 1 else "ep"
        raise UserError(f"`{across}`: LoRA memory is modelled over tp, pp and dp (`zero`); drop `{across}`")
    ranks = [rank_memory(spec, w, stage, micro, m) for stage in range(layout.pp)]
    r = max(ranks, key=lambda x: x.total)  # the first stage on ties
    dtype = train_dtype(spec, w)
    grads = w.grad_dtype or dtype
    group = dp * layout.cp
    n_note = f"{r.params:,} params × {dtype_bytes(dtype)} B"
    if not trivial:
        n_note = f"{r.params:,} params on this GPU × {dtype_bytes(dtype)} B"
    trained = sum(adapter_params(spec, w).values()) if w.lora else count_params(spec).total
    if w.lora:
        n_note = "frozen base: " + weights_bytes(spec, w.formats(spec))[1]
    split = lambda stage: f" ÷ {group} (ZeRO-{w.zero})" if w.zero >= stage else ""  # noqa: E731
    kernel = "flash" if w.flash else "no flash"
    held = f"{r.layers} layers"
    if layout.pp > 1:
        held += (f" × {r.passes[0]} micro-batches in flight" if layout.vpp == 1 else
                 f" in {layout.vpp} chunks × {'+'.join(map(str, r.passes))} passes in flight")
    act_note = (held + f", recompute {w.recompute}, {kernel}" + (", sequence parallel" if layout.sp else "")
                + (", eager element-wise ops" if w.fusion == "eager" else "")
                + (", + fp32 logits" if r.stage == layout.pp - 1 and spec.stack.lm_head else ""))
    of = " of the adapters" if w.lora else ""
    rows = [MemoryRow(component="weights", bytes=r.weights, note=n_note + split(3))]
    if w.lora:
        rows.append(MemoryRow(component="adapters", bytes=r.adapters,
                              note=f"LoRA rank {w.lora_rank} on {','.join(w.lora_targets)}: {trained:,} params × "
                                   f"{dtype_bytes(dtype)} B ({dtype})" + split(3)))
    rows += [MemoryRow(component="gradients", bytes=r.gradients, note=f"{grads} gradients{of}" + split(2)),
             MemoryRow(component="optimizer", bytes=r.optimizer,
                       note=(f"{w.optimizer}: fp32 master + states" if dtype != "fp32" else w.optimizer) + of
                       + split(1)),
             MemoryRow(component="activations", bytes=r.activations,
                       note=act_note + (", inputs of frozen matmuls not kept" if w.lora else ""))]
    who = (f"{dp} data-parallel GPU(s)" if trivial else
           f"{dp} data-parallel replica(s) of {layout.gpus // dp} GPUs")
    notes = [f"`batch` {batch} is the global batch: each of the {who} runs {per_gpu} "
             f"sequence(s) per step, {micro} at a time" + (f" ({m} micro-batches)" if micro < per_gpu else "")]
    if not trivial:
        notes.append(_layout_note(spec, layout, r, m))
    if split := layout.split_note(spec.n_layers):
        notes.append(split)
    if spec.vision:
        notes.append("the vision tower and projector are held on the first stage's GPUs, split over tp as the "
                     "embedding, and train with the model (under LoRA frozen, in the dense dtype); the activations of "
                     "images are not counted (a batch of text)")
    if grads != dtype:
        notes.append(f"gradients in {grads}: {_bytes_per_param(w, group)} bytes per parameter in all"
                     + (" (Megatron's convention: fp32 main gradients)" if grads == "fp32" else ""))
    if w.zero and group == 1:
        notes.append(f"ZeRO-{w.zero} over one GPU (`dp` 1) divides nothing; give `dp`, the data-parallel GPUs")
    elif w.zero:
        notes.append(f"ZeRO-{w.zero} over {group} data-parallel GPUs: figures are per GPU")
    return MemoryReport(
        model=spec.name, mode="train", batch=batch, seq=seq, dp=dp, per_gpu_batch=per_gpu, micro_batch=micro,
        weights_bytes=r.weights, kv_cache_bytes=0, activation_bytes=r.activations, gradient_bytes=r.gradients,
        optimizer_bytes=r.optimizer, total_bytes=r.total, trainable_params=trained, adapter_bytes=r.adapters,
        lora_rank=w.lora_rank, lora_targets=list(w.lora_targets) if w.lora else [], dominant=max(rows, key=lambda x: x.bytes).component,
        breakdown=rows, formula=FORMULA, notes=notes,
        tp=layout.tp, pp=layout.pp, cp=layout.cp, ep=layout.ep, sp=layout.sp, vpp=layout.vpp,
        grad_dtype=grads, micro_batches=m, stage=r.stage, stage_layers=r.layers, stage_params=r.params,
        in_flight=sum(r.passes), activation_bytes_per_layer=r.per_layer,
        stage_totals=[x.total for x in ranks],
    )


def _bytes_per_param(w: Workload, group: int) -> str:
    """Bytes per parameter of weights, gradients, master and states, as text (ZeRO's division shown)."""
    b = {k: dtype_bytes(k) for k in ("fp32", "bf16", "fp16")}
    weights, grads = b[w.weights_dtype], b[w.grad_dtype or w.weights_dtype]
    rest = (4 if w.weights_dtype != "fp32" else 0) + OPTIMIZER_BYTES[w.optimizer]
    parts = [(weights, 3), (grads, 2), (rest, 1)]
    whole = sum(x for x, stage in parts if w.zero < stage or group == 1)
    shared = sum(x for x, stage in parts if w.zero >= stage and group > 1)
    return f"{whole} + {shared}/{group}" if shared else f"{whole}"


def _layout_note(spec: ModelSpec, layout: Layout, r: RankMemory, m: int) -> str:
    """Which GPU the figures are, and why."""
    parts = [f"tp {layout.tp}" + (" + sp" if layout.sp else ""), f"pp {layout.pp}"]
    parts += [f"vpp {layout.vpp} (interleaved)"] if layout.vpp > 1 else []
    parts += [f"cp {layout.cp}"] if layout.cp > 1 else []
    parts += [f"ep {layout.ep}"] if layout.ep > 1 else []
    parts.append(f"dp {layout.dp}")
    where = f"pipeline stage {r.stage} of {layout.pp}"
    edges = [x for x, on in (("the token embedding", r.stage == 0), ("the LM head", r.stage == layout.pp - 1)) if on]
    if layout.pp > 1:
        where += f" ({r.layers} layers" + (" and " + " and ".join(edges) if edges else "") + ")"
        schedule = "interleaved 1F1B" if layout.vpp > 1 else "1F1B"
        held = f"{sum(r.passes)} micro-batches'" if layout.vpp == 1 else f"{sum(r.passes)} chunk passes'"
        where += f", holding {held} activations at its peak ({schedule}, {m} micro-batches per step)"
    tokens = f"; each GPU holds {r.tokens:,} tokens of every sequence (seq / cp)" if layout.cp > 1 else ""
    return f"figures are one GPU's of {' · '.join(parts)} = {layout.gpus} GPUs: the most-loaded, {where}{tokens}"
