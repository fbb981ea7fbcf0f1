"""The `llmcalc latency` command: time per phase and op under a time model (calibrated, or the roofline)."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from llmcalc.cli.app import app
from llmcalc.cli.options import (
    ADVANCED,
    PRECISION,
    BatchOpt,
    CalibrationOpt,
    ConfigOpt,
    DPOpt,
    EncoderSeqOpt,
    EPOpt,
    FormatOpt,
    GPUOpt,
    GPUsOpt,
    GroupOpt,
    HFOpt,
    ImageSizeOpt,
    ImagesOpt,
    KVDtypeOpt,
    MLADecodeOpt,
    PPOpt,
    PresetOpt,
    ReserveOpt,
    SeqOpt,
    TimeModelOpt,
    TPOpt,
    UnitsOpt,
    WeightsDtypeOpt,
    WeightsFormatOpt,
    _count_opt,
    _opt,
    emit,
    image_fields,
    load_gpu_named,
    load_model,
    weight_formats,
)


@app.command()
def latency(
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    hf_config: HFOpt = None,
    batch: BatchOpt = 1,
    seq: SeqOpt = 4096,
    encoder_seq: EncoderSeqOpt = None,
    gen: Annotated[int, _count_opt("--gen", "-g", help="Tokens to generate (the first by prefill).")] = 256,
    images: ImagesOpt = 0,
    image_size: ImageSizeOpt = None,
    gpu: GPUOpt = None,
    gpus: GPUsOpt = None,
    tp: TPOpt = None,
    pp: PPOpt = 1,
    dp: DPOpt = 1,
    ep: EPOpt = 1,
    weights_dtype: WeightsDtypeOpt = None,
    weights_format: WeightsFormatOpt = None,
    kv_dtype: KVDtypeOpt = "bf16",
    group_size: GroupOpt = 128,
    compute_dtype: Annotated[Optional[Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"]], _opt(
        "--compute-dtype", help="Matmul type: fp32, tf32, bf16, fp16, fp8, int8 or fp4 (default: bf16, or the "
        "formats' own).", panel=PRECISION, metavar="DTYPE")] = None,
    attention_dtype: Annotated[Optional[Literal["fp32", "bf16", "fp16", "fp8"]], _opt(
        "--attention-dtype", help="Attention-core type (default: the matmuls', bf16 under fp8/int8).", panel=ADVANCED,
        metavar="DTYPE")] = None,
    time_model: TimeModelOpt = None,
    calibration: CalibrationOpt = None,
    compute_efficiency: Annotated[Optional[float], _opt(
        "--compute-efficiency", help="Share of peak FLOP/s reached (default: the time model's).",
        panel=ADVANCED, metavar="SHARE")] = None,
    memory_efficiency: Annotated[Optional[float], _opt(
        "--memory-efficiency", help="Share of memory bandwidth reached (default: the time model's).",
        panel=ADVANCED, metavar="SHARE")] = None,
    comm_efficiency: Annotated[Optional[float], _opt(
        "--comm-efficiency", help="Share of link bandwidth reached (default: the time model's).",
        panel=ADVANCED, metavar="SHARE")] = None,
    mla_decode: MLADecodeOpt = "absorbed",
    reserve: ReserveOpt = 0.10,
    format: FormatOpt = "table",
    units: UnitsOpt = "both",
) -> None:
    """Time to first token, time per output token and tokens/s, per phase and op (docs/commands/latency.md)."""
    from llmcalc.costs.latency import latency as estimate
    from llmcalc.inputs.time_models import load_time_model
    from llmcalc.workload import Layout, Workload

    w = Workload(batch=batch, seq=seq, encoder_seq=encoder_seq, gen=gen, weights_dtype=weights_dtype,
                 weights_format=weight_formats(weights_format), kv_dtype=kv_dtype, group_size=group_size,
                 compute_dtype=compute_dtype, attention_dtype=attention_dtype, mla_decode=mla_decode, reserve=reserve,
                 layout=Layout.of(gpus, tp, pp, dp, ep), **image_fields(images, image_size))
    device = load_gpu_named(gpu, "latency")
    tm = load_time_model(time_model, device, calibration, compute_efficiency=compute_efficiency,
                         memory_efficiency=memory_efficiency, comm_efficiency=comm_efficiency)
    emit(estimate(load_model(preset, config, hf_config), device, w, tm), format, units, of=latency)
