"""Time and FLOPs utilisation of one training step (one optimizer update). See docs/roofline.md#training-step-time.

The step: a global batch of B sequences of S tokens on gpus = tp · cp · pp · dp GPUs. Each data-parallel replica
runs its B / dp sequences as m = B / (dp · b) micro-batches of b sequences through a pipeline of pp stages, then
the replicas reduce their gradients and every GPU updates its weights. Every figure is one GPU's. On an even
split (pp divides the layers, no stage's layers given) the stages are taken as equal (a stage holds 1/pp of the
layers and of the embedding and head work), which is the least time any split can reach, so the roofline stays a
lower bound; on an uneven split each stage is timed from its own layers (5).

  1. Forward of one micro-batch, F: the prefill step's ops (llmcalc/costs/step.py: step_form; step_time.py: StepTime) on
     T = b·S/cp tokens, with the logits of every position as training computes them (FLOPs: flops.py's
     forward(all logits), ÷ tp), and each layer's element-wise passes (norms, residual adds, activation,
     rotation, an MoE layer's routing copies; fused or eager, `fusion`: elementwise_traffic.py) as memory at the
     bandwidth. Each op takes max(c, m) + overlap·min(c, m) + its kernels' fixed cost.
  2. Backward, B: the gradients of the inputs and of the weights are one matmul each of the forward's shape
     (FWD_BWD = 3 in flops.py), and each reads the weights (or the saved activations) and writes a gradient of
     the size the forward read: twice the forward's FLOPs and bytes, op by op, so twice its time. The attention
     core's backward is its kernel's (flops.py's hardware passes: flash recomputes the scores, 2.5 × the
     forward's FLOPs) at the kernel's backward throughput, `attention_backward` of its forward's (the time
     model's; 0.87 for FlashAttention-2, cuDNN and FlashAttention-3 on an H100): 2.5 / 0.87 = 2.87 × the core's
     forward time. B ≈ 2F where attention is a small share of the work.
  3. Recomputation, R: the forward work redone in the backward pass, as flops.py counts it: every layer but the
     embedding and the head (full), the attention core (selective); none adds nothing.
  4. Layer communication, C: Megatron's tensor parallelism all-reduces the activations twice per layer in the
     forward (after attention and after the FFN) and twice in the backward (the inputs' gradients), and once
     more each per recomputed layer (full); an MoE layer's two all-to-alls are likewise repeated backward.
     C = (2 + [full]) × the forward's collectives (latency's `collectives`, ring all-reduce 2(tp − 1)/tp).
     Charged in full (Megatron's tp_comm_overlap and MoE all-to-all overlap are options, off by default); under
     Layout.tp_comm_overlap the all-reduces run beside the layers' weight matmuls G: beside(G, C_tp) − G; or,
     where the time model hides it (TimeModel.hide_layer_comm: the roofline, the best schedule), run beside the
     slot's compute: beside(F + 2F + R, C) − (F + 2F + R).
  5. Pipeline 1F1B: a micro-batch crosses one stage in slot = (F + 2F + R + C + X) / pp + 2·send (an activation
     forward, a gradient backward, over each stage edge). A stage runs its m micro-batches and waits for the
     fill and drain: pipeline = (m + pp − 1) · slot; the bubble is (pp − 1) · slot, a share (pp − 1) / m of
     the work.
     Uneven stages (Layout.stage_layers: the first L mod pp stages one layer more, or the first and last
     stages' given layers and the rest shared evenly): stage k's work is its own layers' (a layer group's op
     time over its count, per layer), the embedding on the first stage, the head on the last, and its layers'
     share of C; the slowest stage sets the pace: slot = its F + 2F + R + C + X + 2·send.
     Interleaved (vpp ≥ 2): a micro-batch crosses each pipeline GPU vpp times, so 2·vpp·send per slot and a
     bubble of (pp − 1) · slot / vpp, a share (pp − 1) / (m · vpp) of the work (Narayanan et al. 2021). Megatron's
     interleaved schedule runs those sends beside the next chunk's compute (overlap_p2p_comm; off on the plain
     schedule, whose 2·send block): the slot's sends add beside(work, 2·vpp·send) − work, TimeModel.beside.
  6. Context parallelism, X: each GPU runs S/cp tokens of every sequence and, with the ring's load-balanced
     causal chunks (2·cp of them, GPU i holding i and 2·cp − 1 − i), exactly 1/cp of its attention pairs. Per
     attention layer it sends its K/V block (b·S/cp tokens of K and V) cp − 1 times forward and, backward, the
     K/V block and its gradient cp − 1 times each, once more forward where the core is recomputed, on the tier
     its cp GPUs span (tp apart: Megatron's order tp, cp, dp, pp). Each exchange runs on its own stream beside
     the core it feeds; X = beside(core, ring) − core per pass, the ring's exposed part.
  7. Gradient reduction, D: ring all-reduce of the GPU's gradient bytes G (its weights' count in the weights
     dtype) over the g = dp · cp GPUs holding the same weights: 2(g − 1)/g · G over the link. ZeRO 1 and 2:
     reduce-scatter the gradients and all-gather the updated weights, (g − 1)/g · G each: the same bytes.
     ZeRO 3: the weights W are gathered for every micro-batch's forward and backward and its gradients
     reduce-scattered: m·(g − 1)/g · (2W + G) (3·m·(g − 1)/g · G when every weight is trained).
     Overlap rule: a gradient is final only in the last micro-batch's backward, so D hides under that backward
     (2F / pp) at most (ZeRO 3: under the whole replica's forward and backward, m · 3F / pp): exposed =
     beside(W, D) − W = max(W, D) + comm_overlap·min(W, D) − W, for the window W: the reduction runs on its own
     stream. Roofline (comm_overlap 0): max(W, D) − W. Calibrated: 0.12, the SMs NCCL holds (time_model.py).
  8. Optimizer update, O: one pass over the GPU's parameters (÷ dp · cp under ZeRO ≥ 1) reading the master
     weights (or the weights, fp32 training), the gradients and the states (llmcalc/costs/memory.py:
     OPTIMIZER_BYTES) and writing the master weights, the states and the weights: memory-bound, bytes /
     (bandwidth · memory_efficiency).
  9. LoRA: the frozen base's matmuls backward compute the input gradient only; each op's backward is its
     forward time × (flops.py's LoRA hardware train FLOPs of its components / their forward FLOPs − 1): 1 for a
     frozen matmul, the attention kernel's for the core, 0 for the embedding. The adapters are one more op per
     layer (flops.py's adapter_forward FLOPs beside their weights and r-wide activations, split over tp as the
     matrices they adapt, each layer's on its own stage), forward, 2× backward. D and O cover the GPU's adapters
     only (its stage's, over tp; ZeRO 3 gathers its stage's base as well). QLoRA's 4-bit base is dequantised
     before each matmul pass: a kernel of its own writing and reading back 2 × the dense bytes of the weights the
     op reads.

  step = (m + (pp − 1)/vpp) · slot + exposed D + O + step_s of the time model; slot's sends: 2·send (vpp 1),
  beside(work, 2·vpp·send) − work (vpp ≥ 2)
  MFU = model FLOPs / (step · gpus · peak at the compute dtype); model FLOPs = `flops`' train_flops (3 × forward
  with all logits: 6·N·D plus attention, nothing redone; LoRA: frozen 2×, adapters 3×); HFU the same with
  `flops`' train_hardware_flops (the recomputed ops' forward again, and the attention kernel's backward: flash
  recomputes the scores).

The gradient reduction runs on the tier its group crosses (llmcalc/costs/parallel.py: collective_link). Not
modelled: sequence parallelism's own kernels (its reduce-scatter + all-gather move the all-reduce's bytes), the
extra reads of the K/V blocks a context-parallel ring receives and its shorter rings in sliding-window layers,
context parallelism of recurrent layers (refused), LoRA across cp or ep (refused), the optimizer's gradient
clipping, data loading.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

from llmcalc.costs.capacity import usable_bytes
from llmcalc.costs.elementwise_traffic import elementwise_costs
from llmcalc.costs.flops import flops
from llmcalc.costs.kv import nbytes
from llmcalc.costs.lora import layer_adapters, stage_adapter_params
from llmcalc.costs.parallel import collective_link
from llmcalc.costs.shard import stage_weight_bytes, weights_per_gpu
from llmcalc.costs.step import Form, op_name, step_form, step_vars
from llmcalc.costs.step_time import StepTime, matrix_paths, native_types
from llmcalc.costs.train_memory import (OPTIMIZER_BYTES, check_parallel_training, check_training_layout,
                                        train_dtype, training_memory)
from llmcalc.costs.weights import formats_label
from llmcalc.errors import UserError
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import LayerGroup, ModelSpec, dtype_bytes
from llmcalc.model.time_model import ROOFLINE, TimeModel
from llmcalc.model.units import MAC, ceil_div
from llmcalc.reports.training import TrainReport
from llmcalc.workload import RECOMPUTE_MODES, Layout, Workload

FORMULA = ("slot = (F + 2F + R + C)/pp + 2·send; step = (m + pp − 1)·slot + exposed D + O; F: forward of one "
           "micro-batch (all logits), 2F: backward, R: recompute, C: tp all-reduces ×(2 + full), D: dp gradient "
           "reduction 2(dp−1)/dp·G hidden under the last backward, O: optimizer bytes / bandwidth; "
           "MFU = model FLOPs / (step · gpus · peak)")
EDGES = ("embedding", "lm_head")
"""The ops outside the layers: full recomputation does not redo them."""


def forward_costs(spec: ModelSpec, w: Workload, micro_batch: int) -> Form:
    """Per-GPU cost of one forward of `micro_batch` sequences of `seq` tokens, every
    position projected to logits: latency's prefill form with `logits` all. Under context parallelism a GPU
    runs seq / cp tokens of each sequence and 1/cp of its (query, key) pairs: the ring's load-balanced causal
    chunks (GPU i holds chunks i and 2·cp − 1 − i of 2·cp) give each exactly S(S + 1) / (2·cp)."""
    cp = w.layout.cp
    env = step_vars(spec, micro_batch, w.seq // cp, 0)
    if cp > 1:
        whole = step_vars(spec, micro_batch, w.seq, 0)
        env |= {k: ceil_div(v, cp) for k, v in whole.items() if "@" in k}
    form = step_form(spec, w.model_copy(update={"logits": "all"}), prefill=True)
    return {k: cost.at(env) for k, cost in form.items()}


def micro_batches(w: Workload) -> tuple[int, int]:
    """(micro-batch size b, micro-batches per replica m): b = `micro_batch` or the replica's whole share."""
    share = w.batch // w.layout.dp
    b = w.micro_batch or share
    if share % b:
        raise UserError(f"`micro_batch`: {b} does not divide the {share} sequences each data-parallel replica runs "
                        f"per step (`batch` {w.batch} / `dp` {w.layout.dp}); use a divisor of {share}")
    return b, share // b


def peak_memory(spec: ModelSpec, w: Workload) -> int | None:
    """Bytes of the most-loaded GPU in the step, as `llmcalc memory --train` counts them (costs/train_memory.py);
    None where that layout cannot run the workload's micro-batches (its own one-line reason)."""
    try:
        return training_memory(spec, w).total_bytes
    except UserError:
        return None


def largest_micro_batch(spec: ModelSpec, w: Workload, usable: int) -> tuple[int, int] | None:
    """(micro-batch, peak bytes) of the largest micro-batch that divides a replica's share and fits in `usable`
    bytes, or None: activations grow with the micro-batch, so the search runs down the divisors."""
    share = w.batch // w.layout.dp
    small = [d for d in range(1, int(share ** 0.5) + 1) if share % d == 0]
    for b in sorted({*small, *(share // d for d in small)}, reverse=True):
        peak = peak_memory(spec, w.model_copy(update={"micro_batch": b}))
        if peak is not None and peak <= usable:
            return b, peak
    return None


def memory_checked(spec: ModelSpec, gpu: GPU, w: Workload, auto: bool) -> tuple[Workload, int, int, str]:
    """The workload whose step fits one `gpu` (the workload itself, or with `auto` its largest micro-batch that
    fits), its peak bytes, the usable bytes (capacity · (1 − reserve)) and a note; a one-line refusal naming the
    smallest change that fits where it does not."""
    usable = usable_bytes(gpu, w.reserve)
    training_memory(spec, w)  # the layout's own refusals first, in their words
    peak = peak_memory(spec, w)
    if peak <= usable:
        return w, peak, usable, memory_note(peak, usable, gpu)
    share = w.batch // w.layout.dp
    found = largest_micro_batch(spec, w, usable)
    if auto and found:
        b, peak = found
        return (w.model_copy(update={"micro_batch": b}), peak, usable,
                memory_note(peak, usable, gpu) + f"; `auto` chose micro-batch {b}, the largest of the {share} "
                f"sequences per replica that fits")
    need = f"the step needs {peak / 1e9:,.1f} GB on its most-loaded GPU (as `llmcalc memory --train` counts it)"
    room = f"over the {usable / 1e9:,.1f} GB usable on one {gpu.name} ({w.reserve:.0%} reserve)"
    if found:
        b, fits = found
        raise UserError(f"`micro_batch`: {need}, {room}; micro-batch {b} fits ({fits / 1e9:,.1f} GB): give "
                        f"`micro_batch` {b}, or `auto` to pick it")
    raise UserError(f"`micro_batch`: {need}, {room}, and no micro-batch fits; {_other_change(spec, w, usable)}")


def _other_change(spec: ModelSpec, w: Workload, usable: int) -> str:
    """The first change beyond the micro-batch that fits, in order of what it costs: sequence parallelism where
    tp > 1 (Megatron's: the activations tp keeps whole split over the tp GPUs, at no cost in time here), alone
    and then with each of recomputation, ZeRO stages over the data-parallel GPUs, both."""
    modes = list(RECOMPUTE_MODES)  # none, selective, full: each keeps less
    tries = [{"recompute": r} for r in modes[modes.index(w.recompute) + 1:]]
    if w.layout.dp > 1:
        tries += [{"zero": z} for z in range(w.zero + 1, 4)]
        tries += [{"recompute": "full", "zero": 3}] if w.recompute != "full" and w.zero < 3 else []
    if w.layout.tp > 1 and not w.layout.sp:
        tries = [{"sp": True}] + [{"sp": True, **t} for t in tries]
    for change in tries:
        update = {k: v for k, v in change.items() if k != "sp"}
        if "sp" in change:
            update["layout"] = w.layout.model_copy(update={"sp": True})
        found = largest_micro_batch(spec, w.model_copy(update=update), usable)
        if found:
            said = " and ".join("`sp`" if k == "sp" else f"`{k}` {v}" for k, v in change.items())
            return f"{said} with micro-batch {found[0]} fits ({found[1] / 1e9:,.1f} GB)"
    return "more GPUs (`tp`, `pp`) or a GPU with more memory"


def memory_note(peak: int, usable: int, gpu: GPU) -> str:
    return (f"memory: {peak / 1e9:,.1f} GB on the most-loaded GPU (as `llmcalc memory --train` counts it) of the "
            f"{usable / 1e9:,.1f} GB usable on one {gpu.name}")


def training_step(spec: ModelSpec, gpu: GPU, w: Workload, tm: TimeModel = ROOFLINE, auto: bool = False,
                  check_memory: bool = True) -> TrainReport:
    """Time, throughput and FLOPs utilisation of one optimizer step of the workload (`batch` the global batch)
    on its layout of `gpu`s under the time model `tm` (the module docstring derives each term). The step must
    fit the GPU's memory (`memory_checked`; with `auto` the largest micro-batch that fits is taken); a study of
    published runs whose memory this model does not cover passes `check_memory` False."""
    w = w.model_copy(update={"train": True})
    w.check(spec)
    if w.formats(spec).quantized and not w.lora:  # before the memory check, which would name the micro-batch
        raise UserError(f"`weights_dtype`: training quantised weights ({formats_label(spec, w.formats(spec))}) is "
                        "not modelled; use bf16, fp16 or fp32, or train LoRA adapters on the frozen base (`lora_rank`)")
    spec.stack.check_modelled("training time")  # what is not modelled first: no memory advice then refuses it
    check_training_layout(spec, w)
    held = usable = fit_note = None
    if check_memory:
        w, held, usable, fit_note = memory_checked(spec, gpu, w, auto)
    L = w.layout
    b, m = micro_batches(w)
    check_parallel_training(spec, w, m)
    st = StepTime(spec, gpu, w, tm, prefill=True)
    groups, full = spec.layer_groups(), w.recompute == "full"
    back = backward_passes(spec, w)
    ring_s, ring_bytes = _ring(spec, gpu, w, tm, b)
    passes, pass_kernels = elementwise_costs(spec, w, b * w.seq // L.cp)
    costs = forward_costs(spec, w, b)
    dequantise = _dequantised(spec, gpu, w, st, costs) if w.lora else {}
    costs |= passes
    # totals over every op, and per ONE layer of each group / per edge: [forward, backward, recompute, cp exposed,
    # weight matmuls forward + backward + recompute (the window Megatron's tp_comm_overlap hides under)]
    fwd = bwd = rec = exposed_cp = gemm = send = 0.0
    layer: dict[int, list[float]] = defaultdict(lambda: [0.0] * 5)
    edge = {"first": [0.0] * 5, "last": [0.0] * 5}
    comm: dict[str, float] = defaultdict(float)  # tp all-reduces, ep all-to-alls: seconds per forward
    heads = {"lm_head", *spec.stack.head_matmuls(spec.d_model)}
    for key, cost in costs.items():
        t, op = st.time(key, cost) + dequantise.get(key, 0.0) + pass_kernels.get(key, 0) * tm.kernel_s, key.name
        if op == "comm/pp_send":
            send += t / (L.pp - 1)  # the forward's pp − 1 sends, one per stage edge
            continue
        if key.collective:
            comm[op] += t
            continue
        k = back.get(op, 2.0)  # backward passes: input and weight gradients (LoRA: fewer; the core: its kernel's)
        if op == "attention/core":  # the attention kernel's backward runs at its own throughput
            k /= tm.attention_backward
        redo = full and op not in EDGES or w.recompute == "selective" and op == "attention/core"
        n = groups[key.group].count if key.group is not None else 1
        x = [0.0, 0.0, 0.0]  # the ring exchange beyond the core it hides under, per layer: forward, backward, redo
        if key.core and key.group is not None and key.group in ring_s:
            c, r = t / n, ring_s[key.group]
            x = [tm.beside(c, r) - c, tm.beside(k * c, 2 * r) - k * c, (tm.beside(c, r) - c) * redo]
        g = t * (1 + k + redo) if key.group is not None and not (key.core or key.memory) else 0.0
        fwd += t
        bwd += k * t
        rec += t * redo
        exposed_cp += n * sum(x)
        gemm += g
        parts = (t / n, k * t / n, t * redo / n, sum(x), g / n)
        into = layer[key.group] if key.group is not None else edge["last" if op in heads else "first"]
        for i, v in enumerate(parts):
            into[i] += v
    if w.lora:  # the adapters: forward, backward of their inputs and weights (2×), redone with their layer (full)
        for gi, ta in _adapters_time(spec, w, st, tm, b).items():
            n = groups[gi].count
            fwd, bwd, rec = fwd + n * ta, bwd + 2 * n * ta, rec + n * ta * full
            for i, v in enumerate((ta, 2 * ta, ta * full)):
                layer[gi][i] += v
    calls = 2 + full  # each forward collective again in the backward, and in the recomputed forward (full)
    stages = _stages(spec, L, groups, layer, edge, comm, calls)
    even = stages is None
    if even:  # the stages taken as equal: each runs 1/pp of the work
        tp_comm, ep_comm = (calls * comm.get(op, 0.0) for op in ("comm/tp_all_reduce", "comm/ep_all_to_all"))
        stages = [Slot(*(x / L.pp for x in (fwd, bwd, rec, tp_comm, ep_comm, exposed_cp, gemm)))]
    slowest = max(range(len(stages)), key=lambda i: _slot_work(stages[i], tm, L)[0])  # it sets the pipeline's pace
    work = stages[slowest]  # one micro-batch on the stage
    busy, layer_comm = _slot_work(work, tm, L)
    sends = 2 * L.vpp * send
    exposed_send = tm.beside(busy, sends) - busy if L.vpp > 1 else sends  # interleaved: beside the next chunk
    slot = busy + exposed_send
    bubble = (L.pp - 1) * slot / L.vpp

    group = L.dp * L.cp  # the gradients are reduced over the data- and context-parallel GPUs
    if w.lora:  # only the adapters are trained (the GPU's: its stage's over tp); ZeRO 3 gathers the frozen base too
        width = dtype_bytes(train_dtype(spec, w))
        k = slowest
        params = ceil_div(stage_adapter_params(spec, w, L.stage_chunks(spec.n_layers)[k]), L.tp)
        grads = nbytes(params, train_dtype(spec, w))
        gathered = stage_weight_bytes(spec, w, k) + grads
    else:
        grads = weights_per_gpu(spec, w)  # gradients in the weights dtype, as many as the GPU's weights
        width = dtype_bytes(w.weights_dtype)
        params, gathered = grads // width, grads
    ring = (group - 1) * grads / group
    tier, node = collective_link("comm/dp_all_reduce", L, gpu), gpu.link(1)
    link = tier.bytes_per_s * tm.comm_efficiency
    call = tm.collective_s + (max(0.0, tier.latency_s - node.latency_s) if tm.fixed_costs else 0.0)
    if w.zero == 3:
        gather = (group - 1) * gathered / group
        per_micro = ring / link + call if gathered == grads else (2 * gather + ring) / link / 3 + call
        dp_total = 3 * m * per_micro if group > 1 else 0.0
        window = m * (work.forward + work.backward)
    else:
        dp_total = 2 * ring / link + (1 if w.zero == 0 else 2) * call if group > 1 else 0.0
        window = work.backward
    exposed = tm.beside(window, dp_total) - window

    if w.zero >= 1:
        params = ceil_div(params, group)
    master = 4 if width < 4 else 0
    states = OPTIMIZER_BYTES[w.optimizer]
    moved = params * ((master or width) + width + states) + params * (master + states + width)
    optimizer = moved / st.bytes

    step = m * slot + bubble + exposed + optimizer + tm.step_s
    tokens = w.batch * w.seq
    peak = gpu.peak(w.compute_dtype)
    counted = flops(spec, w.model_copy(update={"gen": 1}))
    model_flops, hardware_flops = counted.train_flops, counted.train_hardware_flops
    layers = L.stage_layers(spec.n_layers)
    shares = _shares(spec, L, groups)[slowest]
    rings = 3 + (full or w.recompute == "selective")  # forward, backward (K/V and gradients), a recomputed core
    cp_bytes = m * sum(n * ring_bytes.get(gi, 0) for gi, n in shares.items()) * rings
    return TrainReport(
        model=spec.name, gpu=gpu.name, gpus=L.gpus, tp=L.tp, pp=L.pp, dp=L.dp, ep=L.ep, cp=L.cp, vpp=L.vpp,
        stage_layers=layers, slowest_stage=None if even else slowest, batch=w.batch, seq=w.seq,
        micro_batch=b, micro_batches=m, compute_dtype=w.compute_dtype, attention=w.attention_core,
        recompute=w.recompute, optimizer=w.optimizer, zero=w.zero, lora_rank=w.lora_rank, time_model=tm.name,
        attention_kernel=tm.attention_kernel, fusion=w.fusion,
        peak_flops=peak, step_s=step, tokens_per_s=tokens / step, tokens_per_s_per_gpu=tokens / step / L.gpus,
        model_flops=model_flops, hardware_flops=hardware_flops,
        model_tflops_per_gpu=model_flops / (step * L.gpus) / 1e12,
        mfu=model_flops / (step * L.gpus * peak), hfu=hardware_flops / (step * L.gpus * peak),
        forward_s=m * work.forward, backward_s=m * work.backward, recompute_s=m * work.recompute,
        tp_comm_s=m * layer_comm, cp_comm_s=m * work.cp, pp_comm_s=m * exposed_send, pp_bubble_s=bubble,
        bubble_fraction=(L.pp - 1) / (m * L.vpp), dp_comm_s=exposed, dp_comm_total_s=dp_total,
        optimizer_s=optimizer, overhead_s=tm.step_s, gradient_bytes_per_gpu=grads, cp_comm_bytes_per_gpu=cp_bytes,
        peak_memory_bytes=held, usable_bytes=usable, formula=_formula(spec, w),
        notes=_notes(spec, w, tm, b, m, fit_note, None if even else slowest),
    )


def _shares(spec: ModelSpec, L: Layout, groups: list[LayerGroup]) -> list[dict[int, int]]:
    """Layers of each layer group (its index in `groups`, spec.layer_groups()) on each pipeline stage."""
    def shape(g: LayerGroup) -> LayerGroup:
        return g._replace(count=1)

    out = []
    for chunks in L.stage_chunks(spec.n_layers):
        share: dict[int, int] = defaultdict(int)
        for start, stop in chunks:
            for g in spec.layer_groups(start, stop):
                share[next(i for i, x in enumerate(groups) if shape(x) == shape(g))] += g.count
        out.append(dict(share))
    return out


class Slot(NamedTuple):
    """One micro-batch on one pipeline stage, seconds: its forward, backward and recomputation, its tensor-parallel
    all-reduces and expert all-to-alls, the exposed part of its context-parallel ring, and its layers' weight
    matmuls (forward, backward and recomputed: the GEMMs tp_comm_overlap runs the all-reduces beside)."""

    forward: float
    backward: float
    recompute: float
    tp: float
    ep: float
    cp: float
    gemm: float


def _slot_work(work: Slot, tm: TimeModel, L: Layout) -> tuple[float, float]:
    """(seconds, exposed tp/ep communication) of one micro-batch's work on a stage. The communication is added in
    full, except: the tensor-parallel all-reduces beside the layers' GEMMs under Megatron's tp_comm_overlap
    (Layout.tp_comm_overlap), and all of it beside the compute where the time model hides the layers'
    communication (hide_layer_comm: the roofline, the best schedule)."""
    compute = work.forward + work.backward + work.recompute
    if tm.hide_layer_comm:
        exposed = tm.beside(compute, work.tp + work.ep) - compute
    else:
        exposed = work.ep + (tm.beside(work.gemm, work.tp) - work.gemm if L.tp_comm_overlap else work.tp)
    return compute + exposed + work.cp, exposed


def _stages(spec: ModelSpec, L: Layout, groups: list[LayerGroup], layer: dict, edge: dict, comm: dict,
            calls: int) -> list[Slot] | None:
    """Each pipeline stage's Slot, one micro-batch's seconds, from its own layers, the embedding on the first
    stage and the head on the last; None when the stages are the default even split (taken as equal)."""
    if L.pp == 1 or L.balanced and spec.n_layers % L.pp == 0:
        return None
    moe = sum(g.count for g in groups if g.ffn.routed_experts)
    out = []
    for k, share in enumerate(_shares(spec, L, groups)):
        parts = [sum(n * layer[gi][i] for gi, n in share.items()) for i in range(5)]
        for name, on in (("first", k == 0), ("last", k == L.pp - 1)):
            parts = [a + b * on for a, b in zip(parts, edge[name])]
        layers = sum(share.values())
        routed = sum(n for gi, n in share.items() if groups[gi].ffn.routed_experts)
        tp = calls * comm.get("comm/tp_all_reduce", 0.0) * layers / spec.n_layers
        ep = calls * comm.get("comm/ep_all_to_all", 0.0) * routed / moe if moe else 0.0
        out.append(Slot(parts[0], parts[1], parts[2], tp, ep, parts[3], parts[4]))
    return out


def _ring(spec: ModelSpec, gpu: GPU, w: Workload, tm: TimeModel, micro_batch: int) -> tuple[dict, dict]:
    """Context parallelism's ring exchange, per layer of each group with an attention core (by group index): the
    seconds of one forward's cp − 1 sends of the GPU's K and V block and their bytes. A block is the micro-batch's
    seq / cp tokens of K and V as the core reads them (key_value_io), split over the tensor-parallel ranks that
    hold distinct heads (min(tp, kv heads); MLA's decompressed K and V by head, over tp). Empty at cp 1."""
    L = w.layout
    if L.cp == 1:
        return {}, {}
    tier, node = collective_link("comm/cp_send", L, gpu), gpu.link(1)
    link = tier.bytes_per_s * tm.comm_efficiency
    call = tm.collective_s + (max(0.0, tier.latency_s - node.latency_s) if tm.fixed_costs else 0.0)
    a, tokens = dtype_bytes(w.act_dtype), micro_batch * w.seq // L.cp
    seconds, moved = {}, {}
    for gi, g in enumerate(spec.layer_groups()):
        attn = g.mixer
        if attn is None or not attn.key_value_io():
            continue
        shards = L.tp if attn.cache_heads is None else min(L.tp, attn.cache_heads)
        moved[gi] = (L.cp - 1) * ceil_div(tokens * attn.key_value_io() * a, shards)
        seconds[gi] = moved[gi] / link + (L.cp - 1) * call
    return seconds, moved


def backward_passes(spec: ModelSpec, w: Workload) -> dict[str, float]:
    """op → its backward's work in forwards as it runs: `flops`' hardware train FLOPs of its components (nothing
    recomputed) over their forward FLOPs, less the forward. 2 for a trained matmul (input and weight gradients),
    1 for a frozen one under LoRA (the input gradient only), the attention core's kernel's (flash 2.5, eager 2)."""
    counted = flops(spec, w.model_copy(update={"gen": 1, "logits": "all", "recompute": "none",
                                               "recompute_layers": None}))
    heads = {"lm_head", *spec.stack.head_matmuls(spec.d_model)}
    forward: dict[str, int] = defaultdict(int)
    train: dict[str, int] = defaultdict(int)
    for row in counted.breakdown:
        if row.component.startswith("lora/"):
            continue
        op = row.component if row.component in heads or row.component.startswith("mtp/") else op_name(row.component)
        forward[op] += row.prefill
        train[op] += row.train_hardware
    return {op: train[op] / forward[op] - 1 for op in forward if forward[op]}


def _adapters_time(spec: ModelSpec, w: Workload, st: StepTime, tm: TimeModel, micro_batch: int) -> dict[int, float]:
    """Seconds of one forward of one layer's LoRA adapters over a micro-batch, by layer group (its index in
    spec.layer_groups()), on one GPU: each adapted matrix's FLOPs (MAC · tokens · Adaptable.weights_per_token, as
    flops.py's adapter_forward counts them) at the matmul rate, beside its bytes (its weights, A reading its d_in
    input and writing r, B reading r and writing d_out), under the overlap rule, split over tp as the matrix it
    adapts; two kernels per adapted matrix."""
    a, width, r = dtype_bytes(w.act_dtype), dtype_bytes(train_dtype(spec, w)), w.lora_rank
    tokens, tp, out = micro_batch * w.seq, w.layout.tp, {}
    for gi, g in enumerate(spec.layer_groups()):
        mats = layer_adapters(spec, g, w.lora)
        if not mats:
            continue
        done = sum(MAC * tokens * ad.weights_per_token(r) for _, ad in mats) / tp
        moved = sum(ad.params(r) * width + tokens * ad.used * (ad.d_in + 2 * r + ad.d_out) * a for _, ad in mats) / tp
        out[gi] = tm.overlapped(done / st.flops, moved / st.bytes) + 2 * len(mats) * tm.kernel_s
    return out


def _dequantised(spec: ModelSpec, gpu: GPU, w: Workload, st: StepTime, costs: Form) -> dict:
    """Seconds a quantised frozen base (QLoRA) adds to each op per pass: every layer op whose weights are in a
    format the GPU has no matmul unit for is preceded by a dequantising kernel that writes the weights it reads
    (row FLOPs / 2 of them) in the dense dtype, which the matmul then reads back: 2 × their dense bytes at the
    bandwidth, a kernel of its own (not hidden under the matmul)."""
    formats = w.formats(spec)
    ops = {op_name(p) for p in matrix_paths(spec) if formats.of(p).quantized} - set(native_types(spec, gpu, w))
    copy = 2 * dtype_bytes(formats.dense)
    return {k: copy * (c.row_flops // 2) / st.bytes for k, c in costs.items() if k.group is not None and k.name in ops}


def _formula(spec: ModelSpec, w: Workload) -> str:
    """FORMULA, with the terms of context parallelism, interleaving, uneven stages and LoRA where they apply."""
    L, more = w.layout, []
    if L.pp > 1 and not (L.balanced and spec.n_layers % L.pp == 0):
        more.append("uneven stages: slot = the slowest stage's F + 2F + R + C + 2·send, embedding on the first, "
                    "head on the last")
    if L.cp > 1:
        more.append("cp: S/cp tokens and 1/cp of the pairs per GPU; X: the K/V ring, (cp − 1) blocks per layer "
                    "forward, 2(cp − 1) backward, hidden under the attention core; D over dp·cp")
    if L.vpp > 1:
        more.append("vpp: step = (m + (pp − 1)/vpp)·slot, 2·vpp·send per slot")
    if w.lora:
        more.append("LoRA: backward of frozen matmuls 1× forward, of the adapters 2×, of the core its kernel's; "
                    "D and O of the GPU's adapters only")
    return "; ".join([FORMULA, *more])


def _notes(spec: ModelSpec, w: Workload, tm: TimeModel, b: int, m: int, fit_note: str | None,
           slowest: int | None) -> list[str]:
    L = w.layout
    shape = f"tp={L.tp} pp={L.pp} dp={L.dp}" + (f" cp={L.cp}" if L.cp > 1 else "") + (
        f" vpp={L.vpp}" if L.vpp > 1 else "")
    if slowest is None:
        stages = "the pipeline stages taken as equal"
    else:
        edges = [x for x, on in (("the embedding", slowest == 0), ("the head", slowest == L.pp - 1)) if on]
        stages = (f"the slowest pipeline stage's, stage {slowest} ({L.stage_layers(spec.n_layers)[slowest]} layers"
                  + "".join(f" and {x}" for x in edges) + ")")
    notes = [f"`batch` {w.batch} is the global batch: each of {L.dp} replica(s) runs {w.batch // L.dp} sequence(s) as "
             f"{m} micro-batch(es) of {b}; figures are one GPU's ({shape}), {stages}",
             f"model_flops and hardware_flops count the attention core {w.attention_core} (`attention`); "
             "Megatron-LM and NeMo count it dense",
             "data-parallel reduction at the GPU's interconnect figure (one link tier): across nodes the network is "
             "slower",
             fit_note or "memory is not checked (a study of published runs)"]
    if split := L.split_note(spec.n_layers):
        notes.append(split)
    if w.fusion == "eager":
        notes.append("eager element-wise passes (`fusion`): each PyTorch op its own kernel, as Llama's reference code "
                     "writes them (RMSNorm and RoPE in fp32, the activation and the product apart, K and V copied to "
                     "every query head), their bytes timed and what they keep for the backward counted "
                     "(docs/roofline.md, docs/formulas.md)")
    if L.sp:
        notes.append(f"sequence parallel over the {L.tp} tp GPUs: the activations tensor parallelism keeps whole are "
                     "split over them (memory), the norms' and residual adds' passes with them (time); its "
                     "reduce-scatter and all-gather move the all-reduce's bytes")
    if L.tp_comm_overlap:
        notes.append("Megatron's tp_comm_overlap: the tensor-parallel all-gathers and reduce-scatters run beside the "
                     "layers' GEMMs" + (", hidden under the roofline" if tm.hide_layer_comm else
                                        f", comm_overlap {tm.comm_overlap} of the shorter not hidden"))
    if L.cp > 1:
        notes.append(f"context parallel over {L.cp} GPUs: each runs {w.seq // L.cp:,} tokens of every sequence and "
                     "1/cp of its attention pairs; the K/V blocks go round the ring under the attention core, and "
                     f"the gradients are reduced over dp · cp = {L.dp * L.cp} GPUs")
    if w.lora:
        notes.append(f"LoRA rank {w.lora_rank} on {','.join(w.lora_targets)}: the frozen base's matmuls run forward "
                     "and the input gradient, the adapters forward and both gradients; only the adapters' gradients "
                     "are reduced and updated" + (f" (the base in {formats_label(spec, w.formats(spec))}, "
                                                 "dequantised to its dense type before each matmul)"
                                                 if w.formats(spec).quantized else ""))
    if L.pp > 1 and m * L.vpp < 4 * L.pp:
        notes.append(f"{m} micro-batch(es) over {L.pp} stages: the bubble is {(L.pp - 1) / (m * L.vpp):.0%} of the "
                     "work; smaller `micro_batch` values shrink it")
    if L.dp * L.cp > 1:
        notes.append("the gradient reduction hides under the last micro-batch's backward"
                     + (" (ZeRO-3: under the whole forward and backward)" if w.zero == 3 else "")
                     + (": fully under the roofline" if not tm.comm_overlap else f", comm_overlap "
                        f"{tm.comm_overlap} of the shorter not hidden (the SMs the communication holds)"))
    if L.vpp > 1:
        notes.append("interleaved pipeline: the stage sends run beside the next chunk's compute (Megatron's "
                     "overlap_p2p_comm); without interleaving they block")
    if tm.fixed_costs:
        notes.append(f"time model {tm.name}" + (f" ({tm.gpu})" if tm.gpu else "") + ": overlap, kernel, collective "
                     "and host costs as in its profile (fitted to inference; `time_model`)")
    if spec.mtp_modules and w.mtp:
        notes.append("the MTP module is in the FLOPs but not in the time")
    notes.append(_attention_note(tm))
    if w.compute_dtype in ("fp8", "int8", "fp4"):
        notes.append(f"mfu and hfu are shares of the {w.compute_dtype} peak; the attention core runs in bf16")
    return notes


def _attention_note(tm: TimeModel) -> str:
    """What the attention core's time rests on: a named kernel's figures, or the time model's own."""
    shares = (f"forward at {tm.attention_efficiency or tm.matmul_efficiency('bf16'):.3g} of the bf16 peak, backward "
              f"(2.5 × its FLOPs, flash) at {tm.attention_backward:.3g} of the forward's throughput")
    if tm.attention_kernel:
        return f"attention core: the {tm.attention_kernel} kernel, {shares} (presets/kernels/attention.yaml)"
    return f"attention core: {shares} ({tm.sources.get('attention_kernel', f'time model {tm.name}')})"
