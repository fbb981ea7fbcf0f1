"""The GPU presets as `llmcalc gpus` shows them: one row each, or one GPU in full."""

from __future__ import annotations

from llmcalc.model.gpu import GPU
from llmcalc.reports.gpus import GPUReport, GPURow


def gpu_detail(gpu: GPU) -> GPUReport:
    """This GPU in full, as `llmcalc gpus NAME` shows it."""
    return GPUReport(name=gpu.name, description=gpu.description,
                     peak_flops={k: v * 1e12 if v else None for k, v in gpu.peak_tflops.model_dump().items()},
                     memory_bytes=gpu.memory_bytes, bandwidth_bytes_per_s=gpu.bandwidth,
                     ridge_point=gpu.peak("bf16") / gpu.bandwidth, interconnect=gpu.interconnect,
                     interconnect_bytes_per_s=gpu.interconnect_gbs * 1e9, source=gpu.source,
                     price_per_hour=gpu.price_per_hour, notes=gpu.notes)


def gpu_row(gpu: GPU) -> GPURow:
    """This GPU as a `llmcalc gpus` row: FLOP/s, bytes, bytes/s, and the bf16 ridge point."""
    fp8 = gpu.peak_tflops.fp8
    return GPURow(name=gpu.name, description=gpu.description, bf16_flops=gpu.peak("bf16"),
                  fp8_flops=fp8 * 1e12 if fp8 else None, memory_bytes=gpu.memory_bytes,
                  bandwidth_bytes_per_s=gpu.bandwidth, ridge_point=gpu.peak("bf16") / gpu.bandwidth,
                  interconnect=gpu.interconnect, interconnect_bytes_per_s=gpu.interconnect_gbs * 1e9,
                  source=gpu.source, price_per_hour=gpu.price_per_hour)
