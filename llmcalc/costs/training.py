"""Time and FLOPs utilisation of one training step (one optimizer update). See docs/roofline.md#training-step-time.

The step: a global batch of B sequences of S tokens on gpus = tp · pp · dp GPUs. Each data-parallel replica runs
its B / dp sequences as m = B / (dp · b) micro-batches of b sequences through a pipeline of pp stages, then the
replicas reduce their gradients and every GPU updates its weights. Every figure is one GPU's; the stages are taken
as equal (a stage holds 1/pp of the layers and of the embedding and head work), which is the least time any split
can reach, so the roofline stays a lower bound.

  1. Forward of one micro-batch, F: the prefill step's ops (llmcalc/costs/step.py: step_form; step_time.py: StepTime) on
     T = b·S tokens, with the logits of every position as training computes them (FLOPs: flops.py's
     forward(all logits), ÷ tp). Each op takes max(c, m) + overlap·min(c, m) + its kernels' fixed cost.
  2. Backward, 2F: the gradients of the inputs and of the weights are one matmul each of the forward's shape
     (FWD_BWD = 3 in flops.py), and each reads the weights (or the saved activations) and writes a gradient of
     the size the forward read: twice the forward's FLOPs and bytes, op by op, so twice its time.
  3. Recomputation, R: the forward work redone in the backward pass, as flops.py counts it: every layer but the
     embedding and the head (full), the attention core (selective); none adds nothing.
  4. Layer communication, C: Megatron's tensor parallelism all-reduces the activations twice per layer in the
     forward (after attention and after the FFN) and twice in the backward (the inputs' gradients), and once
     more each per recomputed layer (full); an MoE layer's two all-to-alls are likewise repeated backward.
     C = (2 + [full]) × the forward's collectives (latency's `collectives`, ring all-reduce 2(tp − 1)/tp).
  5. Pipeline 1F1B: a micro-batch crosses one stage in slot = (F + 2F + R + C) / pp + 2·send (an activation
     forward, a gradient backward, over each stage edge). A stage runs its m micro-batches and waits for the
     fill and drain: pipeline = (m + pp − 1) · slot; the bubble is (pp − 1) · slot, a share (pp − 1) / m of
     the work.
  6. Data-parallel gradient reduction, D: ring all-reduce of the GPU's gradient bytes G (its weights' count in
     the weights dtype): 2(dp − 1)/dp · G over the link. ZeRO 1 and 2: reduce-scatter the gradients and
     all-gather the updated weights, (dp − 1)/dp · G each: the same bytes. ZeRO 3: the weights are gathered
     for every micro-batch's forward and backward and its gradients reduce-scattered: 3·m·(dp − 1)/dp · G.
     Overlap rule: a gradient is final only in the last micro-batch's backward, so D hides under that backward
     (2F / pp) at most (ZeRO 3: under the whole replica's forward and backward, m · 3F / pp): exposed =
     max(W, D) + overlap·min(W, D) − W, for the window W. Roofline (overlap 0): full overlap, max(W, D) − W.
     Calibrated: the profile's overlap (fitted to serving kernels; 1 there, no overlap at all).
  7. Optimizer update, O: one pass over the GPU's parameters (÷ dp under ZeRO ≥ 1) reading the master weights
     (or the weights, fp32 training), the gradients and the states (llmcalc/costs/memory.py: OPTIMIZER_BYTES)
     and writing the master weights, the states and the weights: memory-bound, bytes / (bandwidth ·
     memory_efficiency).

  step = (m + pp − 1) · slot + exposed D + O + step_s of the time model
  MFU = model FLOPs / (step · gpus · peak at the compute dtype); model FLOPs = `flops`' train_flops (3 × forward
  with all logits: 6·N·D plus attention, nothing redone); HFU the same with `flops`' train_hardware_flops (the
  recomputed ops' forward again, and the attention kernel's backward: flash recomputes the scores).

The gradient reduction runs on the tier its group crosses (llmcalc/costs/parallel.py: collective_link). Not
modelled: interleaved (virtual) pipeline stages, context parallelism, sequence parallelism's own
kernels (its reduce-scatter + all-gather move the all-reduce's bytes), element-wise kernels, the optimizer's
gradient clipping, data loading.
"""

from __future__ import annotations

from llmcalc.costs.capacity import usable_bytes
from llmcalc.costs.flops import flops
from llmcalc.costs.step import Form, step_form, step_vars
from llmcalc.costs.step_time import StepTime
from llmcalc.costs.memory import OPTIMIZER_BYTES
from llmcalc.costs.parallel import collective_link
from llmcalc.costs.shard import weights_per_gpu
from llmcalc.costs.train_memory import training_memory
from llmcalc.costs.weights import formats_label
from llmcalc.errors import UserError
from llmcalc.model.gpu import GPU
from llmcalc.model.spec import ModelSpec, dtype_bytes
from llmcalc.model.time_model import ROOFLINE, TimeModel
from llmcalc.model.units import ceil_div
from llmcalc.reports.training import TrainReport
from llmcalc.workload import RECOMPUTE_MODES, Workload

FORMULA = ("slot = (F + 2F + R + C)/pp + 2·send; step = (m + pp − 1)·slot + exposed D + O; F: forward of one "
           "micro-batch (all logits), 2F: backward, R: recompute, C: tp all-reduces ×(2 + full), D: dp gradient "
           "reduction 2(dp−1)/dp·G hidden under the last backward, O: optimizer bytes / bandwidth; "
           "MFU = model FLOPs / (step · gpus · peak)")
EDGES = ("embedding", "lm_head")
"""The ops outside the layers: full recomputation does not redo them."""


def forward_costs(spec: ModelSpec, w: Workload, micro_batch: int) -> Form:
    """Per-GPU cost of one forward of `micro_batch` sequences of `seq` tokens, every
    position projected to logits: latency's prefill form with `logits` all."""
    env = step_vars(spec, micro_batch, w.seq, 0)
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
        return w, peak, usable, _memory_note(peak, usable, gpu)
    share = w.batch // w.layout.dp
    found = largest_micro_batch(spec, w, usable)
    if auto and found:
        b, peak = found
        return (w.model_copy(update={"micro_batch": b}), peak, usable,
                _memory_note(peak, usable, gpu) + f"; `auto` chose micro-batch {b}, the largest of the {share} "
                f"sequences per replica that fits")
    need = f"the step needs {peak / 1e9:,.1f} GB on its most-loaded GPU (as `llmcalc memory --train` counts it)"
    room = f"over the {usable / 1e9:,.1f} GB usable on one {gpu.name} ({w.reserve:.0%} reserve)"
    if found:
        b, fits = found
        raise UserError(f"`micro_batch`: {need}, {room}; micro-batch {b} fits ({fits / 1e9:,.1f} GB): give "
                        f"`micro_batch` {b}, or `auto` to pick it")
    raise UserError(f"`micro_batch`: {need}, {room}, and no micro-batch fits; {_other_change(spec, w, usable)}")


def _other_change(spec: ModelSpec, w: Workload, usable: int) -> str:
    """The first change beyond the micro-batch that fits, in order of what it costs: recomputation, then ZeRO
    stages over the data-parallel GPUs, then both."""
    modes = list(RECOMPUTE_MODES)  # none, selective, full: each keeps less
    tries = [{"recompute": r} for r in modes[modes.index(w.recompute) + 1:]]
    if w.layout.dp > 1:
        tries += [{"zero": z} for z in range(w.zero + 1, 4)]
        tries += [{"recompute": "full", "zero": 3}] if w.recompute != "full" and w.zero < 3 else []
    for change in tries:
        found = largest_micro_batch(spec, w.model_copy(update=change), usable)
        if found:
            said = " and ".join(f"`{k}` {v}" for k, v in change.items())
            return f"{said} with micro-batch {found[0]} fits ({found[1] / 1e9:,.1f} GB)"
    return "more GPUs (`tp`, `pp`) or a GPU with more memory"


def _memory_note(peak: int, usable: int, gpu: GPU) -> str:
    return (f"memory: {peak / 1e9:,.1f} GB on the most-loaded GPU (as `llmcalc memory --train` counts it) of the "
            f"{usable / 1e9:,.1f} GB usable on one {gpu.name}")


def training_step(spec: ModelSpec, gpu: GPU, w: Workload, tm: TimeModel = ROOFLINE, auto: bool = False,
                  check_memory: bool = True) -> TrainReport:
    """Time, throughput and FLOPs utilisation of one optimizer step of the workload (`batch` the global batch)
    on its layout of `gpu`s under the time model `tm` (the module docstring derives each term). The step must
    fit the GPU's memory (`memory_checked`; with `auto` the largest micro-batch that fits is taken); a study of
    published runs whose memory this model does not cover passes `check_memory` False."""
    w.check(spec)
    held = usable = memory_note = None
    if check_memory:
        w, held, usable, memory_note = memory_checked(spec, gpu, w, auto)
    L = w.layout
    spec.stack.check_modelled("training time")
    if w.formats(spec).quantized:
        raise UserError(f"`weights_dtype`: training quantised weights ({formats_label(spec, w.formats(spec))}) is "
                        "not modelled; use bf16, fp16 or fp32")
    b, m = micro_batches(w)
    st = StepTime(spec, gpu, w, tm, prefill=True)
    fwd = rec = layer_comm = send = 0.0
    for key, cost in forward_costs(spec, w, b).items():
        t, op = st.time(key, cost), key.name
        if op == "comm/pp_send":
            send += t / (L.pp - 1)  # the forward's pp − 1 sends, one per stage edge
        elif key.collective:
            layer_comm += t
        else:
            fwd += t
            if w.recompute == "full" and op not in EDGES or w.recompute == "selective" and op == "attention/core":
                rec += t
    comm = layer_comm * (2 + (w.recompute == "full"))
    slot = (3 * fwd + rec + comm) / L.pp + 2 * send
    bubble = (L.pp - 1) * slot

    grads = weights_per_gpu(spec, w)  # gradients in the weights dtype, as many as the GPU's weights
    ring = (L.dp - 1) * grads / L.dp
    tier, node = collective_link("comm/dp_all_reduce", L, gpu), gpu.link(1)
    link = tier.bytes_per_s * tm.comm_efficiency
    call = tm.collective_s + (max(0.0, tier.latency_s - node.latency_s) if tm.fixed_costs else 0.0)
    if w.zero == 3:
        dp_total = 3 * m * (ring / link + call) if L.dp > 1 else 0.0
        window = m * 3 * fwd / L.pp
    else:
        dp_total = 2 * ring / link + (1 if w.zero == 0 else 2) * call if L.dp > 1 else 0.0
        window = 2 * fwd / L.pp
    exposed = tm.overlapped(window, dp_total) - window

    width = dtype_bytes(w.weights_dtype)
    params = grads // width
    if w.zero >= 1:
        params = ceil_div(params, L.dp)
    master = 4 if width < 4 else 0
    states = OPTIMIZER_BYTES[w.optimizer]
    moved = params * ((master or width) + width + states) + params * (master + states + width)
    optimizer = moved / st.bytes

    step = m * slot + bubble + exposed + optimizer + tm.step_s
    tokens = w.batch * w.seq
    peak = gpu.peak(w.compute_dtype)
    counted = flops(spec, w.model_copy(update={"gen": 1}))
    model_flops, hardware_flops = counted.train_flops, counted.train_hardware_flops
    return TrainReport(
        model=spec.name, gpu=gpu.name, gpus=L.gpus, tp=L.tp, pp=L.pp, dp=L.dp, ep=L.ep, batch=w.batch, seq=w.seq,
        micro_batch=b, micro_batches=m, compute_dtype=w.compute_dtype, attention=w.attention_core,
        recompute=w.recompute, optimizer=w.optimizer, zero=w.zero, time_model=tm.name, peak_flops=peak,
        step_s=step, tokens_per_s=tokens / step, tokens_per_s_per_gpu=tokens / step / L.gpus,
        model_flops=model_flops, hardware_flops=hardware_flops,
        model_tflops_per_gpu=model_flops / (step * L.gpus) / 1e12,
        mfu=model_flops / (step * L.gpus * peak), hfu=hardware_flops / (step * L.gpus * peak),
        forward_s=m * fwd / L.pp, backward_s=m * 2 * fwd / L.pp, recompute_s=m * rec / L.pp,
        tp_comm_s=m * comm / L.pp, pp_comm_s=m * 2 * send, pp_bubble_s=bubble, bubble_fraction=(L.pp - 1) / m,
        dp_comm_s=exposed, dp_comm_total_s=dp_total, optimizer_s=optimizer, overhead_s=tm.step_s,
        gradient_bytes_per_gpu=grads, peak_memory_bytes=held, usable_bytes=usable, formula=FORMULA, notes=_notes(spec, w, tm, b, m, memory_note),
    )


def _notes(spec: ModelSpec, w: Workload, tm: TimeModel, b: int, m: int, memory_note: str | None) -> list[str]:
    L = w.layout
    notes = [f"`batch` {w.batch} is the global batch: each of {L.dp} replica(s) runs {w.batch // L.dp} sequence(s) as "
             f"{m} micro-batch(es) of {b}; figures are one GPU's (tp={L.tp} pp={L.pp} dp={L.dp}), the pipeline "
             "stages taken as equal",
             f"model_flops and hardware_flops count the attention core {w.attention_core} (`attention`); "
             "Megatron-LM and NeMo count it dense",
             "data-parallel reduction at the GPU's interconnect figure (one link tier): across nodes the network is "
             "slower",
             memory_note or "memory is not checked (a study of published runs)"]
    if L.pp > 1 and m < 4 * L.pp:
        notes.append(f"{m} micro-batch(es) over {L.pp} stages: the bubble is {(L.pp - 1) / m:.0%} of the work; "
                     "smaller `micro_batch` values shrink it")
    if L.dp > 1:
        notes.append("the gradient reduction hides under the last micro-batch's backward"
                     + (" (ZeRO-3: under the whole forward and backward)" if w.zero == 3 else "")
                     + (": fully under the roofline" if not tm.overlap else f", `overlap` {tm.overlap} of the "
                        "shorter not hidden (the profile's figure, fitted to serving kernels)"))
    if tm.fixed_costs:
        notes.append(f"time model {tm.name}" + (f" ({tm.gpu})" if tm.gpu else "") + ": overlap, kernel, collective "
                     "and host costs as in its profile (fitted to inference; `time_model`)")
    if spec.mtp_modules and w.mtp:
        notes.append("the MTP module is in the FLOPs but not in the time")
    if w.compute_dtype in ("fp8", "int8"):
        notes.append(f"mfu and hfu are shares of the {w.compute_dtype} peak; the attention core runs in bf16")
    return notes
