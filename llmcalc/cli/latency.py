"""The `llmcalc latency` command: roofline time per phase and op."""

from __future__ import annotations

from typing import Annotated, Literal

from llmcalc.cli.app import app
from llmcalc.cli.options import (
    GPUS,
    PRECISION,
    BatchOpt,
    ConfigOpt,
    DPOpt,
    EPOpt,
    FormatOpt,
    GPUOpt,
    GPUsOpt,
    GroupOpt,
    HFOpt,
    KVDtypeOpt,
    MLADecodeOpt,
    PPOpt,
    PresetOpt,
    ReserveOpt,
    SeqOpt,
    TPOpt,
    UnitsOpt,
    WeightsDtypeOpt,
    _count_opt,
    _opt,
    emit,
    load_gpu_named,
    load_model,
)


@app.command()
def latency(
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    hf_config: HFOpt = None,
    batch: BatchOpt = 1,
    seq: SeqOpt = 4096,
    gen: Annotated[int, _count_opt("--gen", "-g", help="Tokens to generate (the first comes from prefill).")] = 256,
    gpu: GPUOpt = None,
    gpus: GPUsOpt = None,
    tp: TPOpt = None,
    pp: PPOpt = 1,
    dp: DPOpt = 1,
    ep: EPOpt = 1,
    weights_dtype: WeightsDtypeOpt = "bf16",
    kv_dtype: KVDtypeOpt = "bf16",
    group_size: GroupOpt = 128,
    compute_dtype: Annotated[Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8"], _opt(
        "--compute-dtype", help="Matmul type that sets the peak: fp32, tf32, bf16, fp16, fp8 or int8 (weight-only "
        "quantization still computes in bf16).", panel=PRECISION, metavar="DTYPE")] = "bf16",
    compute_efficiency: Annotated[float, _opt("--compute-efficiency", help="Share of peak FLOP/s reached.",
                                              panel=GPUS, metavar="SHARE")] = 0.8,
    memory_efficiency: Annotated[float, _opt("--memory-efficiency", help="Share of memory bandwidth reached.",
                                             panel=GPUS, metavar="SHARE")] = 0.9,
    comm_efficiency: Annotated[float, _opt("--comm-efficiency", help="Share of one-way link bandwidth reached.",
                                           panel=GPUS, metavar="SHARE")] = 0.8,
    mla_decode: MLADecodeOpt = "absorbed",
    reserve: ReserveOpt = 0.10,
    format: FormatOpt = "table",
    units: UnitsOpt = "both",
) -> None:
    """Roofline time: time to first token, time per output token, tokens/s, per phase and op."""
    from llmcalc.costs.latency import Efficiency
    from llmcalc.costs.latency import latency as estimate
    from llmcalc.workload import Layout, Workload

    w = Workload(batch=batch, seq=seq, gen=gen, weights_dtype=weights_dtype, kv_dtype=kv_dtype, group_size=group_size,
                 compute_dtype=compute_dtype, mla_decode=mla_decode, reserve=reserve,
                 layout=Layout.of(gpus, tp, pp, dp, ep))
    eff = Efficiency(compute_efficiency=compute_efficiency, memory_efficiency=memory_efficiency,
                     comm_efficiency=comm_efficiency)
    emit(estimate(load_model(preset, config, hf_config), load_gpu_named(gpu, "latency"), w, eff), format, units,
         of=latency)
