"""The `llmcalc kv` command: KV cache bytes."""

from __future__ import annotations

from llmcalc.cli.app import app
from llmcalc.cli.options import (
    BatchOpt,
    ConfigOpt,
    EncoderSeqOpt,
    FormatOpt,
    HFOpt,
    ImageSizeOpt,
    ImagesOpt,
    KVDtypeOpt,
    PresetOpt,
    SeqOpt,
    UnitsOpt,
    emit,
    image_fields,
    load_model,
)


@app.command()
def kv(
    preset: PresetOpt = None,
    config: ConfigOpt = None,
    hf_config: HFOpt = None,
    batch: BatchOpt = 1,
    seq: SeqOpt = 4096,
    encoder_seq: EncoderSeqOpt = None,
    kv_dtype: KVDtypeOpt = "bf16",
    images: ImagesOpt = 0,
    image_size: ImageSizeOpt = None,
    format: FormatOpt = "table",
    units: UnitsOpt = "both",
) -> None:
    """KV cache bytes for BATCH sequences of SEQ tokens: total, per layer type, per token."""
    from llmcalc.costs.kv import kv_cache
    from llmcalc.workload import Workload

    w = Workload(batch=batch, seq=seq, encoder_seq=encoder_seq, kv_dtype=kv_dtype, **image_fields(images, image_size))
    emit(kv_cache(load_model(preset, config, hf_config), w), format, units, of=kv)
