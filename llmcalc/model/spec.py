"""Model architecture (`ModelSpec`): validated, frozen.

A spec holds what the checkpoint is; how it is run is a `Workload` (llmcalc/workload.py), and the two
share no field. Every derived size is a property or a method, never a silently rewritten field.
"""

from typing import Annotated, Literal, NamedTuple

from pydantic import Field, model_validator

from llmcalc.errors import UserError
from llmcalc.model.attention import Attention
from llmcalc.model.base import ByKind, Deferred, Frozen, Name, NonNegInt, PosInt
from llmcalc.model.embedding import Positions
from llmcalc.model.ffn import FFN
from llmcalc.model.norm import Norm
from llmcalc.model.stack import Decoder, Stack

AttentionSpec = Annotated[Attention, ByKind()]
"""Any attention variant (Attention.all_kinds(): the sparse ones load when a spec names one), picked by its
`kind`."""
FFNSpec = Annotated[FFN, ByKind()]
"""Any FFN variant (FFN.all_kinds()), picked by its `kind`."""
PositionsSpec = Annotated[Positions, ByKind()]
"""Any position encoding (Positions.all_kinds()), picked by its `kind`."""
StackSpec = Annotated[Stack, ByKind()]
"""A decoder (the default), an encoder or an encoder-decoder (llmcalc/model/stack.py, encoders.py), picked by its
`kind`."""
LayerKind = Literal["full", "sliding"]

MAX_LAYERS = 100_000
"""Sanity bound on n_layers (the largest published models have ~200)."""


class LayerSlot(Frozen):
    """One layer of a hybrid pattern: its mixer (`attention`: the spec's attention over every earlier token,
    `sliding`: over the last sliding_window, a key of the spec's `mixers`, or null: none, as Nemotron-H's MLP
    layers) and its FFN (`ffn`: the spec's, `dense`: an MoE's dense FFN, `none`: as Nemotron-H's mixer layers)."""

    mixer: str | None = "attention"
    ffn: Literal["ffn", "dense", "none"] = "ffn"


class LayerGroup(NamedTuple):
    """`count` layers that share one shape: their mixer (`mixer_name`: the component path it is reported
    under; None: a layer without one), attention window (None = full) and FFN. A record of the spec's own
    validated parts (ModelSpec.layer_groups), not a model: nothing is validated again, and no schema is built at
    start-up (docs/performance.md)."""

    count: int
    window: int | None
    ffn: FFN
    mixer: Attention | None
    mixer_name: str = "attention"

    @property
    def name(self) -> str:
        if self.mixer is None:
            return f"no mixer + {self.ffn.label}"
        if self.mixer_name in ("attention", "shared_kv"):  # shared_kv: over an earlier layer's K/V (Gemma 3n)
            attn = f"sliding-window ({self.window}) attention" if self.window else "full attention"
            attn += " over an earlier layer's K/V" if self.mixer_name == "shared_kv" else ""
        else:
            attn = f"{self.mixer_name} ({self.mixer.label})"
        return f"{attn} + {self.ffn.label}"


class ModelSpec(Frozen):
    """A transformer stack: a causal decoder, or a bidirectional encoder (`stack`, llmcalc/model/stack.py).

    layer_pattern repeats over the layers (["sliding", "full"] alternates, starting with a sliding
    layer); sliding layers attend to the last `sliding_window` tokens. mtp_modules counts DeepSeek-V3
    multi-token-prediction modules, reported apart from the main model.
    """

    name: Name
    source: str | None = None
    best_effort: list[str] | None = None
    """Set by a best-effort Hugging Face import (`--hf-generic`, a model_type llmcalc does not know, read as a
    llama-style decoder): what was assumed, one entry each. None: an exact import, a preset or a spec."""
    vocab_size: PosInt
    d_model: PosInt
    n_layers: Annotated[int, Field(gt=0, le=MAX_LAYERS, strict=True)]
    max_seq_len: PosInt
    tie_embeddings: bool
    lm_head_bias: bool = False
    embedding_extra_rows: NonNegInt = 0
    """Rows the token embedding holds beyond vocab_size (Llama 3.2 Vision: 8, for its image and padding tokens):
    they add rows·d to the embedding only; the LM head still has vocab_size outputs (no logits for them)."""
    norm: Norm
    positions: PositionsSpec
    attention: AttentionSpec
    ffn: FFNSpec
    sliding_window: PosInt | None = None
    layer_pattern: list[LayerKind] = Field(default_factory=lambda: ["full"], min_length=1)
    mixers: dict[str, AttentionSpec] = Field(default_factory=dict)
    """Mixers beside `attention` that hybrid_pattern names (Mamba-2 layers of a hybrid), by component path."""
    hybrid_pattern: list[LayerSlot] | None = None
    """Each layer's mixer and FFN, repeating over the layers (instead of layer_pattern); None: every layer is
    `attention` (full or sliding by layer_pattern) + `ffn`."""
    mtp_modules: NonNegInt = 0
    stack: StackSpec = Decoder()
    """What the layers are for: a generating decoder (default) or a bidirectional encoder."""
    checkpoint: Annotated[object, Deferred("llmcalc.model.formats", "Checkpoint")] = None
    """How the published checkpoint stores it (formats, stored buffers: llmcalc/model/formats.py `Checkpoint`);
    None: every tensor in bf16."""
    vision: Annotated[object, Deferred("llmcalc.model.vision", "VisionTowerSpec")] = None
    """A vision-language model's image encoder and projector (llmcalc/model/vision.py `VisionTowerSpec`); None:
    text only."""

    @model_validator(mode="before")
    @classmethod
    def _default_head_dim(cls, data):
        """An attention whose kind has `head_dim` and leaves it out gets d_model / heads, as transformers does
        (a hand-written spec need not repeat it); a d_model the heads do not divide still needs it written."""
        attn = data.get("attention") if isinstance(data, dict) else None
        if not isinstance(attn, dict) or "head_dim" in attn:
            return data
        variant = Attention.variant(str(attn.get("kind")))
        heads, width = attn.get("heads"), data.get("d_model")
        if variant is None or not variant.head_dim_default or not all(
                isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in (heads, width)):
            return data
        if width % heads:
            return data  # head_dim stays missing: the message names it
        return data | {"attention": attn | {"head_dim": width // heads}}

    @model_validator(mode="after")
    def _consistent(self) -> "ModelSpec":
        if self.hybrid_pattern is not None:
            self._check_hybrid()
        has_sliding = "sliding" in self.layer_pattern or any(
            slot.mixer == "sliding" for slot in self.hybrid_pattern or [])
        if has_sliding and self.sliding_window is None:
            raise ValueError("sliding_window: layer_pattern has sliding layers; set sliding_window (tokens)")
        if self.sliding_window is not None and not has_sliding:
            raise ValueError(
                'layer_pattern: sliding_window is set but no layer is sliding; '
                'add "sliding" to layer_pattern or drop sliding_window'
            )
        if self.embedding_extra_rows and self.tie_embeddings:
            raise ValueError("embedding_extra_rows: a tied LM head shares the embedding's vocab_size rows; "
                             "set tie_embeddings false or embedding_extra_rows 0")
        self.attention.check_spec(self)
        if len(self.layer_pattern) > self.n_layers:
            raise ValueError(
                f"layer_pattern: {len(self.layer_pattern)} entries for {self.n_layers} layers; "
                "give at most n_layers entries"
            )
        self.ffn.check_spec(self)
        self.positions.check_spec(self)
        self.stack.check_spec(self)
        return self

    def for_images(self, tokens: int) -> "ModelSpec":
        """This model with every mixer sized for `tokens` image tokens a sequence (Attention.for_images: a
        cross-attention layer's cache; the others unchanged); itself when nothing changes."""
        mixers = {name: m.for_images(tokens) for name, m in self.mixers.items()}
        if mixers == self.mixers:
            return self
        return type(self).model_validate(self.model_dump() | {"mixers": {k: m.model_dump() for k, m in mixers.items()}})

    @property
    def embedding_rows(self) -> int:
        """Rows of the token embedding: vocab_size + embedding_extra_rows."""
        return self.vocab_size + self.embedding_extra_rows

    def _check_hybrid(self) -> None:
        pattern = self.hybrid_pattern or []
        if not pattern or len(pattern) > self.n_layers:
            raise ValueError(f"hybrid_pattern: {len(pattern)} entries for {self.n_layers} layers; give 1 to n_layers")
        if self.layer_pattern != ["full"]:
            raise ValueError("layer_pattern: a hybrid_pattern names each layer's mixer; drop layer_pattern")
        for slot in pattern:
            if slot.mixer is not None and slot.mixer not in ("attention", "sliding", *self.mixers):
                raise ValueError(f"hybrid_pattern: mixer {slot.mixer!r} is not attention, sliding or one of mixers "
                                 f"({', '.join(self.mixers) or 'none'}); add it to mixers")
        for name in self.mixers:
            if name in ("attention", "ffn", "norms", "embedding", "lm_head", "mtp"):
                raise ValueError(f"mixers: {name!r} is a component path of its own; name the mixer otherwise")
        if any(s.ffn == "dense" for s in pattern) and self.ffn.routed_experts and not self.ffn.dense_d_ff:
            raise ValueError("ffn.dense_d_ff: hybrid_pattern has dense slots; give the dense FFN's width")
        if self.mtp_modules or self.ffn.leading_dense_layers:
            raise ValueError("hybrid_pattern: give dense layers as ffn: dense slots, and no mtp_modules")

    @property
    def mixer_label(self) -> str:
        """The layers' mixers in a few characters: the attention's kind (GQA 32/8), a hybrid's distinct mixers in
        order of appearance (Mamba-2 + GQA 32/8), marked by the stack's role (enc, enc-dec) and a vision tower."""
        groups = self.layer_groups() if self.hybrid else []
        labels = [g.mixer.kind_label for g in groups if g.mixer is not None] or [self.attention.kind_label]
        text = " + ".join(dict.fromkeys(labels))
        marks = [m for m in (self.stack.marker, "vision" if self.vision else "") if m]
        return f"{text} ({', '.join(marks)})" if marks else text

    @property
    def hybrid(self) -> bool:
        """Whether layers differ in their mixer (hybrid_pattern is set)."""
        return self.hybrid_pattern is not None

    def check_uniform(self, what: str) -> None:
        """Raise UserError when layers differ in their mixer: `what` costs every layer with one mixer."""
        if self.hybrid:
            raise UserError(f"`hybrid_pattern`: {what} does not cover hybrid layer patterns yet (params, kv, flops, "
                            f"memory and the time model do); leave {what} out")
        if self.stack.kv_reading_layers:  # Gemma 3n's last layers hold no k or v to adapt
            raise UserError(f"`model`: {what} does not cover layers that read an earlier layer's K/V (Gemma 3n's "
                            f"shared layers) yet; leave {what} out")

    def sliding_layers(self, start: int, stop: int) -> int:
        """How many of layers start..stop-1 are sliding-window layers."""
        p = self.layer_pattern
        per_cycle = p.count("sliding")

        def upto(n: int) -> int:
            full, rest = divmod(n, len(p))
            return full * per_cycle + p[:rest].count("sliding")

        return upto(stop) - upto(start)

    def ffn_prefix(self, group: LayerGroup) -> str:
        """Component path of a group's FFN: "ffn/", or "ffn/dense_" for an MoE model's dense layers."""
        return "ffn/" if group.ffn.kind == self.ffn.kind else "ffn/dense_"

    def layer_groups(self, start: int = 0, stop: int | None = None) -> list[LayerGroup]:
        """The distinct layer shapes with their counts, among layers start..stop-1 (default: all); MoE dense
        layers are the first ones."""
        stop = self.n_layers if stop is None else stop
        if self.hybrid_pattern is not None:
            return self._hybrid_groups(start, stop)
        if self.stack.layer_ffn_widths is not None:
            return self._width_groups(start, stop, self.stack.layer_ffn_widths)
        n_dense = self.ffn.leading_dense_layers
        reader = self.n_layers - self.stack.kv_reading_layers  # the first layer reading an earlier layer's K/V
        spans = [(start, min(n_dense, stop), self.ffn.dense_ffn() if n_dense else None, self.attention, "attention"),
                 (max(start, n_dense), min(stop, reader), self.ffn, self.attention, "attention")]
        if reader < self.n_layers:
            spans.append((max(start, n_dense, reader), stop, self.ffn, self.attention.reading_shared_kv(),
                          "shared_kv"))
        groups = []
        for start, stop, ffn, mixer, path in spans:
            if ffn is None or stop <= start:
                continue
            sliding = self.sliding_layers(start, stop)
            for count, window in ((stop - start - sliding, None), (sliding, self.sliding_window)):
                if count:
                    groups.append(LayerGroup(count=count, window=window, ffn=ffn, mixer=mixer, mixer_name=path))
        return groups

    def _width_groups(self, start: int, stop: int, widths: list[int]) -> list[LayerGroup]:
        """Layers start..stop-1 whose FFN widths differ (Stack.layer_ffn_widths), grouped by (reads an earlier
        layer's K/V, sliding, width) in order of first appearance; each width's FFN is the spec's at that d_ff."""
        reader = self.n_layers - self.stack.kv_reading_layers
        counts: dict[tuple[bool, bool, int], int] = {}
        for i in range(start, stop):
            key = (i >= reader, self.layer_pattern[i % len(self.layer_pattern)] == "sliding", widths[i])
            counts[key] = counts.get(key, 0) + 1
        groups = []
        for (shared, sliding, width), count in counts.items():
            ffn = self.ffn if width == self.ffn.d_ff else self.ffn.model_copy(update={"d_ff": width})
            mixer = self.attention.reading_shared_kv() if shared else self.attention
            groups.append(LayerGroup(count=count, window=self.sliding_window if sliding else None, ffn=ffn,
                                     mixer=mixer, mixer_name="shared_kv" if shared else "attention"))
        return groups

    def _hybrid_groups(self, start: int, stop: int) -> list[LayerGroup]:
        """Layers start..stop-1 of a hybrid_pattern, grouped by (mixer, FFN) in order of first appearance."""
        pattern = self.hybrid_pattern or []
        counts: dict[tuple[str | None, str], int] = {}
        for i in range(start, stop):
            slot = pattern[i % len(pattern)]
            counts[slot.mixer, slot.ffn] = counts.get((slot.mixer, slot.ffn), 0) + 1
        groups = []
        for (mixer, ffn_kind), count in counts.items():
            if ffn_kind == "none":
                ffn = FFN.variant("none").model_validate({"kind": "none"})
            else:
                ffn = self.ffn.dense_ffn() if ffn_kind == "dense" and self.ffn.routed_experts else self.ffn
            window = self.sliding_window if mixer == "sliding" else None
            block = self.attention if mixer in ("attention", "sliding") else self.mixers.get(mixer or "")
            name = "attention" if mixer in ("attention", "sliding", None) else mixer
            groups.append(LayerGroup(count=count, window=window, ffn=ffn, mixer=block, mixer_name=name))
        return groups


DTYPE_BITS: dict[str, int] = {"fp32": 32, "tf32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4, "fp4": 4}


def dtype_bytes(dtype: str) -> int:
    """Bytes of one element of a whole-byte dtype (activations, master weights, optimizer states): DTYPE_BITS / 8."""
    return DTYPE_BITS[dtype] // 8
