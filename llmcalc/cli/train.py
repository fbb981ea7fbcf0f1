"""The `llmcalc train` command: time, throughput and MFU of one training step under a time model."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from llmcalc.cli.app import app
from llmcalc.cli.options import (
    GPUS,
    PRECISION,
    TRAINING,
    AttentionOpt,
    CalibrationOpt,
    ConfigOpt,
    DPOpt,
    EPOpt,
    FormatOpt,
    GPUOpt,
    HFOpt,
    LoraOpt,
    LoraTargetsOpt,
    OptimizerOpt,
    PPOpt,
    PresetOpt,
    ReserveOpt,
    RecomputeOpt,
    SeqOpt,
    TimeModelOpt,
    TPOpt,
    UnitsOpt,
    WeightsDtypeOpt,
    ZeroOpt,
    _count_opt,
    _opt,
    emit,
    load_gpu_named,
    load_model,
    lora_fields,
    weight_formats,
)
from llmcalc.errors import UserError


@app.command()
def train(
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    hf_config: HFOpt = None,
    batch: Annotated[int, _count_opt("--batch", "-b", help="Global batch: sequences per optimizer "
                                     "step.")] = 512,
    seq: SeqOpt = 4096,
    micro_batch: Annotated[Optional[int], _count_opt(
        "--micro-batch", help="Sequences per replica at a time (default: batch / dp).",
        panel=TRAINING)] = None,
    gpu: GPUOpt = None,
    gpus: Annotated[Optional[int], _count_opt(
        "--gpus", help="GPUs in all: tp · pp · dp; alone, the data-parallel replicas (dp = gpus / pp, tp 1).",
        panel=GPUS)] = None,
    tp: TPOpt = None,
    pp: PPOpt = 1,
    dp: DPOpt = 1,
    ep: EPOpt = 1,
    cp: Annotated[int, _count_opt("--cp", help="Context-parallel GPUs.", panel=GPUS)] = 1,
    vpp: Annotated[int, _count_opt("--vpp", help="Virtual stages per pipeline GPU.", panel=GPUS)] = 1,
    first_stage_layers: Annotated[Optional[int], _count_opt(
        "--first-stage-layers", help="First pipeline stage's layers.", panel=GPUS)] = None,
    last_stage_layers: Annotated[Optional[int], _count_opt(
        "--last-stage-layers", help="Last pipeline stage's layers.", panel=GPUS)] = None,
    lora_rank: LoraOpt = None,
    lora_targets: LoraTargetsOpt = None,
    qlora: Annotated[bool, _opt("--qlora", help="With --lora: QLoRA's 4-bit base (nf4-dq).", panel=TRAINING)] = False,
    weights_dtype: WeightsDtypeOpt = "bf16",
    compute_dtype: Annotated[Literal["fp32", "tf32", "bf16", "fp16", "fp8"], _opt(
        "--compute-dtype", help="Matmul type and MFU peak: fp32, tf32, bf16, fp16 or fp8.", panel=PRECISION,
        metavar="DTYPE")] = "bf16",
    recompute: RecomputeOpt = "none",
    optimizer: OptimizerOpt = "adamw",
    zero: ZeroOpt = 0,
    attention: AttentionOpt = "causal",
    time_model: TimeModelOpt = None,
    calibration: CalibrationOpt = None,
    reserve: ReserveOpt = 0.10,
    auto: Annotated[bool, _opt("--auto", help="If the step does not fit, take the largest micro-batch that does.",
                               panel=TRAINING)] = False,
    format: FormatOpt = "table",
    units: UnitsOpt = "both",
) -> None:
    """Time, tokens/s and MFU of one training step under a time model; a step that does not fit is refused
    (docs/commands/train.md)."""
    from llmcalc.costs.training import training_step
    from llmcalc.inputs.time_models import load_time_model
    from llmcalc.workload import Layout, Workload

    if gpus and tp is None and dp == 1:  # training spreads --gpus over data-parallel replicas unless told
        tp, dp = 1, max(1, gpus // (pp * cp))
    if qlora and lora_rank is None:
        raise UserError("--qlora: QLoRA trains LoRA adapters on the 4-bit base; add --lora RANK")
    from llmcalc.model.lora import QLORA_FORMATS

    w = Workload(batch=batch, seq=seq, train=True, micro_batch=micro_batch, weights_dtype=weights_dtype,
                 compute_dtype=compute_dtype, recompute=recompute, optimizer=optimizer, zero=zero,
                 attention_core=attention, logits="all", reserve=reserve,
                 layout=Layout.of(gpus, tp, pp, dp, ep, cp, vpp=vpp, first_stage_layers=first_stage_layers,
                                  last_stage_layers=last_stage_layers),
                 **lora_fields(lora_rank, lora_targets),
                 **({"weights_format": weight_formats(QLORA_FORMATS)} if qlora else {}))
    device = load_gpu_named(gpu, "train")
    tm = load_time_model(time_model, device, calibration)
    emit(training_step(load_model(preset, config, hf_config), device, w, tm, auto=auto), format, units, of=train)
