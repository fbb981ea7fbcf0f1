"""KV cache bytes. See docs/formulas.md#kv-cache.

Per layer and token: GQA/MHA/MQA cache K and V, 2·H_kv·h elements; MLA caches its latent and the
shared RoPE key, r_kv + d_r (no ×2). A sliding-window layer keeps the last window − 1 tokens between
steps (the next token makes `window` keys), as transformers' sliding cache does.
total = Σ_layers B · min(S, window − 1) · elements · bytes per element.
An encoder (llmcalc/model/encoders.py) reads its input in one pass and keeps no cache: 0.
An encoder-decoder adds its cross-attention cache, L_d · B · S_e · 2·H_kv·h elements, fixed in the decoder's length
(EncoderDecoder.cross_cache_bytes, docs/encoder-decoder.md#caches).
"""

from __future__ import annotations

from llmcalc.model.attention import Attention
from llmcalc.model.spec import DTYPE_BITS, ModelSpec
from llmcalc.model.units import packed_bytes
from llmcalc.reports.kv import KVLayerRow, KVReport
from llmcalc.workload import Workload

FORMULA = ("total = Σ_layers batch · min(seq, window − 1) · kv_elements_per_token · bytes; "
           "GQA 2·H_kv·h, MLA r_kv + d_r; a recurrent layer (Mamba, Mamba-2, Gated DeltaNet): batch · its state")


def nbytes(elements: int, dtype: str) -> int:
    """Bytes of `elements` values of `dtype`, rounded up to whole bytes (int4: two per byte)."""
    return packed_bytes(elements, DTYPE_BITS[dtype])


def cache_layers(spec: ModelSpec) -> dict[int | None, int]:
    """Layers by window (None: full attention): what the cache's size depends on (not the FFN)."""
    out: dict[int | None, int] = {}
    for group in spec.layer_groups():
        out[group.window] = out.get(group.window, 0) + group.count
    return out


def mixer_layers(spec: ModelSpec) -> dict[tuple[str, int | None], tuple[Attention, int]]:
    """Layers by (mixer path, window): each mixer with its layer count (layers without a mixer keep nothing)."""
    out: dict[tuple[str, int | None], tuple[Attention, int]] = {}
    for g in spec.layer_groups():
        if g.mixer is not None:
            key = (g.mixer_name, g.window)
            out[key] = (g.mixer, out[key][1] + g.count if key in out else g.count)
    return out


def kv_layers(spec: ModelSpec, batch: int, seq: int,
              kv_dtype: str) -> list[tuple[Attention, int | None, int, int, int]]:
    """Per mixer and window (None: full attention): (mixer, window, layers, tokens kept, bytes one layer caches
    for `batch` sequences of `seq` tokens)."""
    bits = DTYPE_BITS[kv_dtype]
    out = []
    for (_, window), (attn, count) in mixer_layers(spec).items():
        kept = attn.cached_tokens(seq, window) if spec.stack.decodes else 0
        out.append((attn, window, count, kept, attn.layer_cache_bytes(batch, kept, bits)))
    return out


def kv_bytes(spec: ModelSpec, batch: int, seq: int, kv_dtype: str) -> int:
    """The KV cache's bytes for `batch` sequences of `seq` tokens: Σ_windows layers · bytes per layer."""
    return sum(count * per_layer for _, _, count, _, per_layer in kv_layers(spec, batch, seq, kv_dtype))


def kv_cache(spec: ModelSpec, w: Workload) -> KVReport:
    """The KV cache of the workload's `batch` sequences of `seq` tokens in `kv_dtype`, per layer type and in
    total."""
    spec = w.sized(spec)  # cross-attention layers read the workload's images (Workload.sized)
    batch, seq, stack = w.batch, w.seq, spec.stack
    stack.check_sized("the KV cache")
    enc_seq = stack.encoder_length(w.encoder_seq, seq)
    layers = kv_layers(spec, batch, seq, w.kv_dtype)
    rows = [
        KVLayerRow(
            layer_type=attn.layer_type(window), layers=count, tokens_cached=kept,
            elements_per_token=attn.kv_elements(), bytes_per_layer=per_layer, bytes=count * per_layer,
        )
        for attn, window, count, kept, per_layer in layers
    ]
    cross = stack.cross_cache_bytes(spec, batch, enc_seq, DTYPE_BITS[w.kv_dtype])
    if cross:  # an encoder-decoder's cross-attention cache: every decoder layer, the encoder's positions
        rows.append(KVLayerRow(layer_type="cross-attention (encoder output)", layers=spec.n_layers,
                               tokens_cached=enc_seq, elements_per_token=spec.attention.kv_elements(),
                               bytes_per_layer=cross // spec.n_layers, bytes=cross))
    # a variant that keeps other than K and V of every token
    notes = list(dict.fromkeys(attn.kv_note for attn, *_ in layers if attn.kv_note))
    if seq > spec.max_seq_len:
        notes.append(f"seq {seq:,} exceeds the model's max_seq_len {spec.max_seq_len:,}: an extrapolation")
    if not spec.stack.decodes:
        notes.append("an encoder-only model keeps no KV cache: it reads its input in one forward pass")
    elif len(layers) == 1 and rows[0].layers > 1 and not cross:
        notes.append(
            f"one layer holds {rows[0].bytes_per_layer:,} bytes; the cache is {rows[0].layers} layers of it "
            "(a per-layer figure quoted as the whole cache forgets the layer count)"
        )
    notes += [n for n in (stack.cross_cache_note(enc_seq),) if n]
    w.check_images(spec)
    images = w.image_tokens(spec) if w.images else 0
    return KVReport(
        model=spec.name, batch=batch, seq=seq, kv_dtype=w.kv_dtype, image_tokens=images,
        image_bytes=sum(r.bytes * _first_kept(images, seq, r.tokens_cached) // r.tokens_cached for r in rows if images),
        total_bytes=sum(r.bytes for r in rows),
        bytes_per_token=sum(attn.token_cache_bytes(count, DTYPE_BITS[w.kv_dtype])
                            for attn, _, count, _, _ in layers) * spec.stack.decodes,
        encoder_seq=enc_seq or None, cross_bytes_per_sequence=cross // batch,
        state_bytes_per_sequence=sum(attn.sequence_cache_bytes(count, DTYPE_BITS[w.kv_dtype])
                                     for attn, _, count, _, _ in layers),
        per_layer=rows, formula=FORMULA, notes=notes,
    )


def _first_kept(first: int, seq: int, kept: int) -> int:
    """Of the first `first` tokens of a `seq`-token prompt, how many a layer that keeps the last `kept` still holds."""
    return max(0, first - (seq - kept))
