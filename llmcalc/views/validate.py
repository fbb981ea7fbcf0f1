"""Estimates against measurements of the torch reference model (llmcalc/reference/).
See docs/validation.md.

Conventions are matched on both sides: torch's FlopCounterMode counts every matmul and the full
S×S of scaled_dot_product_attention, so FLOPs are estimated with attention_core="dense"; prefill and
decode project the last position's logits, training all of them. Exact quantities (parameters,
FLOPs, KV bytes) must agree to the unit; peak memory and time are models and get tolerances.
"""

from __future__ import annotations

from llmcalc.costs.flops import flops
from llmcalc.costs.kv import kv_cache, nbytes
from llmcalc.costs.memory import memory
from llmcalc.costs.params import params
from llmcalc.errors import UserError
from llmcalc.model.spec import ModelSpec
from llmcalc.reports.validate import ValidationReport, ValidationRow
from llmcalc.views.torch_needed import require_torch
from llmcalc.workload import Workload

EXACT = 0.0
PEAK_TOLERANCE = 0.05
"""Peak memory: the activation peak is a model of what the kernels hold at their largest stage
(docs/formulas.md#inference-peak); the reference's bounded block scratch and allocator slack are not in it."""
ENGINE_TOLERANCE = 0.15
"""Time on the reference engine (its profile: presets/calibration/reference/<gpu>.yaml) against the reference's
measured time: the engine profile describes these very kernels."""
TRAIN_PEAK_TOLERANCE = 0.30
"""Peak memory of a LoRA training step. The training activation model (docs/formulas.md#memory) keeps a norm's
16-bit input and SwiGLU's gate and up, as fused kernels do; torch's composite kernels, which the reference runs,
also keep fp32 copies of each norm's input and the SiLU output (activations 22-27% above the estimate for
Llama-2), and the loss holds fp32 transients of the logits. What LoRA changes is checked exactly (the adapter
activation bytes and static memory rows); this row bounds the whole (docs/validation.md)."""


def row(model: str, quantity: str, convention: str, estimate: int | float, measured: int | float,
        tol: float) -> ValidationRow:
    err = abs(measured - estimate) / measured if measured else float(estimate != measured)
    return ValidationRow(model=model, quantity=quantity, convention=convention, estimate=estimate,
                         measured=measured, rel_error=err, tolerance=tol, ok=err <= tol)


def lower_bound_row(model: str, quantity: str, convention: str, estimate: float, measured: float) -> ValidationRow:
    """A bound's row: ok when the estimate is at most the measurement (the roofline's time)."""
    return ValidationRow(model=model, quantity=quantity, convention=convention, estimate=estimate,
                         measured=measured, rel_error=abs(measured - estimate) / measured, tolerance=0.0,
                         ok=estimate <= measured, bound=True)


def gpu_preset(device_name: str) -> str:
    """Map torch.cuda.get_device_name() to a GPU preset: the longest matching key."""
    from llmcalc.inputs.gpus import preset_for_device

    name = preset_for_device(device_name)
    if name is None:
        raise UserError(f"`device` cuda: no GPU preset for {device_name!r}; validate on fake or cpu instead")
    return name


def compare(spec: ModelSpec, batch: int, seq: int, m, mla_decode: str, device: str) -> list[ValidationRow]:
    """Rows for one measured model `m` (llmcalc.reference.measure.Measured)."""
    n = spec.name
    w = Workload(batch=batch, seq=seq, attention_core="dense", logits="last", mla_decode=mla_decode)
    f = flops(spec, w)
    mla = f", MLA decode {mla_decode}" if spec.attention.latent_cache else ""
    counts = params(spec)
    rows = [
        row(n, "params", "every parameter, tied once" + (" (language model)" if spec.vision else ""),
            counts.language, m.params_total, EXACT),
        row(n, "prefill FLOPs", "matmuls, full S×S attention, last logits", f.prefill_flops, m.prefill_flops, EXACT),
        row(n, "decode FLOPs", "one step at context S" + mla, f.decode_flops, m.decode_flops, EXACT),
        row(n, "KV cache bytes", "bf16 cache tensors after prefill", kv_cache(spec, w).total_bytes,
            m.kv_bytes, EXACT),
    ]
    if m.train_flops is not None:
        rows.insert(3, row(n, "train FLOPs", "forward + backward, all logits", f.train_flops, m.train_flops, EXACT))
    if spec.vision and spec.vision.referenced:
        rows += vision_rows(spec, counts.vision)
    if m.peak_bytes is not None and memory_note(spec) is None:  # the reference's serving kernels: flash, grouped GEMM
        est = memory(spec, w).total_bytes - nbytes(counts.vision, "bf16")  # the reference decoder has no tower
        rows.append(row(n, "peak memory", "prefill: weights + KV + activation peak (flash)", est, m.peak_bytes,
                        PEAK_TOLERANCE))
    return rows


def vision_rows(spec: ModelSpec, vision_params: int) -> list[ValidationRow]:
    """The vision tower and projector against the reference tower (llmcalc/reference/vision.py) built on the meta
    device: its parameters and one native-size image's FLOPs under FlopCounterMode."""
    from llmcalc.reference.vision import measure_image

    tower, n = spec.vision, spec.name
    side = tower.image_size
    measured_params, measured_flops, _ = measure_image(tower, spec.d_model, side, side)
    return [row(n, "vision params", "vision tower + projector", vision_params, measured_params, EXACT),
            row(n, "vision FLOPs per image", f"{side}×{side} px, matmuls, every pair",
                sum(tower.flops(side, side, spec.d_model).values()), measured_flops, EXACT)]


def compare_lora(spec: ModelSpec, batch: int, seq: int, m, w: Workload) -> list[ValidationRow]:
    """Rows for one LoRA training step `m` (llmcalc.reference.measure.LoraMeasured) against the estimates of the
    LoRA workload `w` (train, attention dense)."""
    n, lora = spec.name, f"rank {w.lora_rank} on {','.join(w.lora_targets)}"
    mem = memory(spec, w)
    rows = [
        row(n, "trainable params", f"LoRA adapters, {lora}", mem.trainable_params, m.trainable_params, EXACT),
        row(n, "params", "base + adapters", params(spec).total + mem.trainable_params, m.params_total, EXACT),
        row(n, "train FLOPs", "LoRA step: forward + backward, all logits, full S×S", flops(spec, w).train_flops,
            m.train_flops, EXACT),
    ]
    if m.saved_bytes is not None:
        at = {"batch": batch, "seq": seq, "micro_batch": None}
        frozen = w.model_copy(update=at | {"lora_targets": ()})
        added = memory(spec, w.model_copy(update=at)).activation_bytes - memory(spec, frozen).activation_bytes
        static = mem.weights_bytes + mem.adapter_bytes + mem.gradient_bytes + mem.optimizer_bytes
        rows += [row(n, "adapter activation bytes", "kept for the backward, LoRA − frozen base", added,
                     m.saved_bytes - m.frozen_saved_bytes, EXACT),
                 row(n, "train static memory", "weights, adapters, gradients, fp32 master + Adam", static,
                     m.static_bytes, EXACT),
                 row(n, "train peak memory", "LoRA step, flash attention", mem.total_bytes, m.peak_bytes,
                     TRAIN_PEAK_TOLERANCE)]
    return rows


def memory_note(spec: ModelSpec) -> str | None:
    """Why the peak-memory row is left out for `spec` (the memory model refuses it, or a layer's reference module
    holds activations the memory model does not count: Attention.reference_activations), or None."""
    try:
        memory(spec, Workload(batch=1, seq=1))
    except UserError as e:
        return f"{spec.name}: peak memory left out ({e})"
    why = next((g.mixer.reference_activations for g in spec.layer_groups()
                if g.mixer is not None and g.mixer.reference_activations), None)
    return f"{spec.name}: peak memory left out ({why})" if why else None


def validate(specs: list[ModelSpec], batch: int, seq: int, device: str, mla_decode: str = "absorbed",
             progress=None, lora: Workload | None = None) -> ValidationReport:
    """Measure each spec on `device` and compare; `progress(spec)` is called before each. `lora`: a LoRA
    training workload (lora_rank, lora_targets): its training step is measured and compared instead."""
    for spec in specs:
        check_measurable(spec, batch, seq)
    measure = require_device(device)
    if lora is not None:
        return _validate_lora(specs, batch, seq, device, lora, progress)
    rows, gpu = [], None
    for spec in specs:
        if progress:
            progress(spec)
        m = measure(spec, batch, seq, device=device, mla_decode=mla_decode, train=device != "cuda")
        rows += compare(spec, batch, seq, m, mla_decode, device)
        if device == "cuda":
            gpu, timed = _timing_rows(spec, batch, seq, m)
            rows += timed
    notes = ["FLOPs under FlopCounterMode's conventions: every matmul, attention over the full S×S, "
             "no element-wise work; the estimates use the same (attention=dense)"]
    notes += [n for n in map(memory_note, specs) if n]
    notes += [f"{s.name}: vision rows left out (the reference model has no {s.vision.kind} tower yet; its language "
              "model, cross-attention layers included, is measured)"
              for s in specs if s.vision and not s.vision.referenced]
    if device == "fake":
        notes.append("fake: FakeTensorMode on the CPU; shapes and allocations are real, values are not")
    if device == "cuda":
        notes.append("time rows: the roofline is a lower bound and passes when it is below the measurement; the "
                     "reference engine's time (its profile for this GPU, where bundled) within 15%, a host-bound step's "
                     "GPU time as a lower bound (docs/validation.md)")
    return ValidationReport(device=device, gpu=gpu, models=[s.name for s in specs], batch=batch, seq=seq,
                            ok=all(r.ok for r in rows), rows=rows, notes=notes)


def _validate_lora(specs, batch, seq, device, lora: Workload, progress) -> ValidationReport:
    from llmcalc.reference.measure import measure_lora

    if device == "cuda":
        raise UserError("`device`: LoRA validation runs on fake or cpu; use `device` fake or cpu")
    w = lora.model_copy(update={"batch": batch, "seq": seq, "train": True, "attention_core": "dense"})
    rows = []
    for spec in specs:
        if progress:
            progress(spec)
        m = measure_lora(spec, batch, seq, w.lora_rank, w.lora, device)
        rows += compare_lora(spec, batch, seq, m, w)
    notes = ["LoRA: base frozen in bf16, adapters bf16 with fp32 master and Adam m, v; the embedding's output "
             "requires grad (PEFT's enable_input_require_grads), so the input gradient flows through every layer",
             "FLOPs under FlopCounterMode's conventions (attention=dense): forward + backward of one step"]
    if any(s.ffn.routed_experts for s in specs):
        notes.append("memory rows are left out for routed experts: the reference's counted expert kernels gather "
                     "the expert weights per row")
    return ValidationReport(device=device, gpu=None, models=[s.name for s in specs], batch=batch, seq=seq,
                            ok=all(r.ok for r in rows), rows=rows, notes=notes)


MAX_LAYERS = 256
"""Most layers one validation builds: torch runs every layer, ~0.3 s each under FakeTensorMode on a
CPU core, so 256 (twice Llama-3.1-405B's 126) is over a minute; --layers cuts a model."""
MAX_ELEMENTS = 2**60
"""Most elements of one reference tensor: torch refuses storage beyond 2^63 bytes even on fake tensors."""


def check_measurable(spec: ModelSpec, batch: int, seq: int) -> None:
    """The reference model can run `spec` at batch × seq: learned positions cover the decode step,
    few enough layers to finish, and its largest tensors (scores, logits) within torch's limits."""
    if spec.positions.learned and seq >= spec.max_seq_len:
        raise UserError(f"`seq`: {spec.name} has learned positions for {spec.max_seq_len:,} tokens and validate "
                        f"decodes one after the prompt; give `seq` {spec.max_seq_len - 1} or less")
    if spec.n_layers > MAX_LAYERS:
        raise UserError(f"`layers`: {spec.name} has {spec.n_layers:,} layers and validate runs each in torch; "
                        f"give `layers` {MAX_LAYERS} or fewer (the formulas are per layer group)")
    widest = seq * spec.attention.heads + spec.vocab_size + 8 * spec.d_model + 4 * spec.ffn.transient_elements()
    if batch * seq * widest > MAX_ELEMENTS:
        raise UserError(f"`batch`/`seq`: {batch:,} × {seq:,} tokens of {spec.name} build tensors of about "
                        f"{batch * seq * widest:.2e} elements, beyond torch's limit; give a smaller `batch` or `seq`")


def require_device(device: str):
    """The reference model's measure(), when torch is installed and `device` is there; else a one-line error."""
    require_torch("validate", device, "use `device` fake (full size) or `device` cpu with `layers`/`scale`")
    from llmcalc.reference.measure import measure

    return measure


def _timing_rows(spec: ModelSpec, batch: int, seq: int, m) -> tuple[str, list[ValidationRow]]:
    import torch

    from llmcalc.costs.latency import latency
    from llmcalc.inputs.gpus import load_gpu
    from llmcalc.inputs.time_models import load_engine_profile
    from llmcalc.reference.kernel_count import count_step

    name = gpu_preset(torch.cuda.get_device_name())
    gpu = load_gpu(name)
    lat = latency(spec, gpu, Workload(batch=batch, seq=seq, gen=2))
    bound = f"roofline on {name}: a lower bound"
    rows = [lower_bound_row(spec.name, "prefill time (s)", bound, lat.ttft_s, m.prefill_s),
            lower_bound_row(spec.name, "decode step time (s)", bound + " (step in a CUDA graph)", lat.tpot_s,
                            m.decode_s)]
    profile = load_engine_profile(gpu)
    if profile is not None:
        counted = (count_step(spec, batch, seq, 0), count_step(spec, batch, 1, seq))
        rows += engine_rows(spec, gpu, profile, counted, batch, seq, m.prefill_s, m.decode_s)
    return name, rows


def engine_rows(spec: ModelSpec, gpu, profile, counted: tuple, batch: int, seq: int, prefill_s: float,
                decode_s: float) -> list[ValidationRow]:
    """The reference engine's time (llmcalc/costs/engine_time.py) against the measured prefill (eager) and decode step
    (replayed from a CUDA graph), within ENGINE_TOLERANCE; a step the engine profile finds host-bound (its host's
    dispatch outlasting its kernels) checks its GPU time as a lower bound, since the host's speed per call
    differs between machines of one GPU kind (docs/validation.md)."""
    from llmcalc.costs.engine_time import engine_step

    w = Workload(batch=batch, seq=seq, gen=2)
    steps = ((engine_step(spec, gpu, w, profile, counted[0], batch, seq, 0), "prefill time (s)", prefill_s, "eager"),
             (engine_step(spec, gpu, w, profile, counted[1], batch, 1, seq), "decode step time (s)", decode_s,
              "step in a CUDA graph"))
    rows = []
    for step, quantity, measured, how in steps:
        convention = f"reference engine on {gpu.name} ({how})"
        if step.bound == "host":
            rows.append(lower_bound_row(spec.name, quantity, convention + ": host-bound, its GPU time a lower bound",
                                        step.gpu_s, measured))
        else:
            rows.append(row(spec.name, quantity, convention, step.seconds, measured, ENGINE_TOLERANCE))
    return rows


def scaled_copy(spec: ModelSpec, layers: int | None, scale: int) -> ModelSpec:
    """A smaller model of the same family for real runs: the first `layers` layers, and every width
    (d_model, heads, latent ranks, FFN widths, vocabulary) divided by `scale`; head dims, experts' count
    and windows kept."""
    from llmcalc.inputs.presets import spec_from_data

    data = spec.model_dump()
    div = lambda x: max(1, x // scale) if x else x  # noqa: E731
    ffn = spec.ffn
    if layers:
        data["n_layers"] = layers
        data["layer_pattern"] = data["layer_pattern"][:layers]
        if spec.hybrid_pattern:
            data["hybrid_pattern"] = data["hybrid_pattern"][:layers]
        ffn = ffn.cut_to(layers)
        data["ffn"] = ffn.model_dump()
    if scale > 1:
        data["d_model"], data["vocab_size"] = div(data["d_model"]), div(data["vocab_size"])
        data["attention"], data["ffn"] = spec.attention.scaled_fields(div), ffn.scaled_fields(div)
        data["mixers"] = {k: m.scaled_fields(div) for k, m in spec.mixers.items()}
    data["name"] = f"{spec.name} ({data['n_layers']} layers, widths ÷{scale})"
    return spec_from_data(data, f"scaled copy of {spec.name}")


def check_real_run(spec: ModelSpec, batch: int, seq: int, device: str) -> None:
    """A real run must fit: half the machine's RAM on the CPU, the GPU's memory on cuda (for a hybrid the memory
    model does not cover yet: its bf16 weights and cache); on the CPU with one attention layer's scores besides,
    batch × heads × seq² fp32 values, which torch's CPU attention builds whole (a flash kernel on a GPU does not)."""
    if memory_note(spec) is None:
        need = memory(spec, Workload(batch=batch, seq=seq)).total_bytes
    else:
        need = nbytes(params(spec).total, "bf16") + kv_cache(spec, Workload(batch=batch, seq=seq)).total_bytes
    if device == "cpu":
        import os

        need += batch * spec.attention.heads * seq * seq * 4  # torch's CPU attention holds one layer's fp32 scores
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
        where = "half of this machine's memory"
    else:
        import torch

        have = torch.cuda.get_device_properties(0).total_memory
        where = "the GPU's memory"
    if need > have:
        raise UserError(f"`device` {device}: {spec.name} needs about {need / 1e9:.1f} GB, more than {where} "
                        f"({have / 1e9:.1f} GB); use `device` fake for the full size, or a scaled copy "
                        "such as `layers` 2 `scale` 8")
