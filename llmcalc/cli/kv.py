"""The `llmcalc kv` command: KV cache bytes."""

from __future__ import annotations

from llmcalc.cli import groups
from llmcalc.cli.app import command
from llmcalc.cli.options import (
    EncoderSeqOpt,
    KVDtypeOpt,
)


@command(rank=20)
def kv(
    *,
    model: groups.Model,
    shape: groups.Batch,
    encoder_seq: EncoderSeqOpt = None,
    kv_dtype: KVDtypeOpt = "bf16",
    image: groups.Images,
    out: groups.Output,
) -> None:
    """KV cache bytes for BATCH sequences of SEQ tokens: total, per layer type, per token."""
    from llmcalc import api

    out.emit(api.kv(model.ref(), **shape.values(), **image.values(), encoder_seq=encoder_seq, kv_dtype=kv_dtype),
             of=kv)
