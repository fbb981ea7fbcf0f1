"""The GPU presets as `llmcalc gpus` shows them: one row each, or one GPU in full."""

from __future__ import annotations

from llmcalc.model.gpu import GPU
from llmcalc.reports.gpus import GPUReport, GPURow


def gpu_detail(gpu: GPU) -> GPUReport:
    """This GPU in full, as `llmcalc gpus NAME` shows it, with its fields as a GPU file writes them (`spec`)."""
    def seconds(us: float | None) -> float | None:
        return None if us is None else us * 1e-6

    return GPUReport(name=gpu.name, description=gpu.description,
                     peak_flops={k: v * 1e12 if v else None for k, v in gpu.peak_tflops.model_dump().items()},
                     memory_bytes=gpu.memory_bytes, bandwidth_bytes_per_s=gpu.bandwidth,
                     ridge_point=gpu.peak("bf16") / gpu.bandwidth, interconnect=gpu.interconnect,
                     interconnect_bytes_per_s=gpu.interconnect_gbs * 1e9, source=gpu.source,
                     price_per_hour=gpu.price_per_hour, architecture=gpu.architecture,
                     gpus_per_node=gpu.gpus_per_node, interconnect_latency_s=seconds(gpu.interconnect_latency_us),
                     network_bytes_per_s=None if gpu.network_gbs is None else gpu.network_gbs * 1e9,
                     network_latency_s=seconds(gpu.network_latency_us), notes=gpu.notes,
                     spec=gpu.model_dump(mode="json", exclude_none=True))


def gpu_row(gpu: GPU) -> GPURow:
    """This GPU as a `llmcalc gpus` row: FLOP/s, bytes, bytes/s, and the bf16 ridge point."""
    fp8 = gpu.peak_tflops.fp8
    return GPURow(name=gpu.name, description=gpu.description, bf16_flops=gpu.peak("bf16"),
                  fp8_flops=fp8 * 1e12 if fp8 else None, memory_bytes=gpu.memory_bytes,
                  bandwidth_bytes_per_s=gpu.bandwidth, ridge_point=gpu.peak("bf16") / gpu.bandwidth,
                  interconnect=gpu.interconnect, interconnect_bytes_per_s=gpu.interconnect_gbs * 1e9,
                  source=gpu.source, price_per_hour=gpu.price_per_hour)
