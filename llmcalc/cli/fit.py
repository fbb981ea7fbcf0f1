"""The `llmcalc fit` command: what fits on the GPUs, and the smallest layout that holds the model."""

from __future__ import annotations

from typing import Annotated

from llmcalc.cli.app import app
from llmcalc.cli.options import (
    ADVANCED,
    CalibrationOpt,
    ConfigOpt,
    DPOpt,
    EPOpt,
    FormatOpt,
    GPUOpt,
    GPUsOpt,
    GroupOpt,
    HFOpt,
    ImageSizeOpt,
    ImagesOpt,
    KVDtypeOpt,
    PPOpt,
    PresetOpt,
    ReserveOpt,
    TimeModelOpt,
    TPOpt,
    UnitsOpt,
    WeightsDtypeOpt,
    WeightsFormatOpt,
    _count_opt,
    emit,
    image_fields,
    load_gpu_named,
    load_model,
    weight_formats,
)


@app.command(help=(
    "Does it fit: weights, KV cache and workspace per GPU; the largest batch and longest "
    "context; when it does not, the fewest GPUs that hold it."))
def fit(
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    hf_config: HFOpt = None,
    batch: Annotated[int, _count_opt("--batch", "-b", help="Sequences in all; max_seq is found for this batch.")] = 1,
    seq: Annotated[int, _count_opt("--seq", "-s", help="Tokens per sequence; max_batch is found for "
                                   "it.")] = 4096,
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
    reserve: ReserveOpt = 0.10,
    prefill_chunk: Annotated[int, _count_opt("--prefill-chunk", help="Tokens per prefill chunk (sizes the "
                                             "workspace).", panel=ADVANCED)] = 8192,
    time_model: TimeModelOpt = None,
    calibration: CalibrationOpt = None,
    images: ImagesOpt = 0,
    image_size: ImageSizeOpt = None,
    format: FormatOpt = "table",
    units: UnitsOpt = "both",
) -> None:
    from llmcalc.costs.fit import fit as check
    from llmcalc.inputs.time_models import load_time_model
    from llmcalc.workload import Layout, Workload

    w = Workload(batch=batch, seq=seq, weights_dtype=weights_dtype, weights_format=weight_formats(weights_format),
                 kv_dtype=kv_dtype, group_size=group_size,
                 reserve=reserve, prefill_chunk=prefill_chunk, layout=Layout.of(gpus, tp, pp, dp, ep),
                 **image_fields(images, image_size))
    device = load_gpu_named(gpu, "fit")
    tm = load_time_model(time_model, device, calibration)
    emit(check(load_model(preset, config, hf_config), device, w, tm), format, units, of=fit)
