"""Model architecture (`ModelSpec`): validated, frozen.

A spec holds what the checkpoint is; how it is run is a `Workload` (llmcalc/workload.py), and the two
share no field. Every derived size is a property or a method, never a silently rewritten field.
"""

from typing import Annotated, Literal

from pydantic import Field, model_validator

from llmcalc.model.attention import Attention
from llmcalc.model.base import ByKind, Frozen, NonNegInt, PosInt
from llmcalc.model.embedding import Positions
from llmcalc.model.ffn import FFN
from llmcalc.model.formats import Checkpoint
from llmcalc.model.norm import Norm
from llmcalc.model.stack import Decoder, Stack
from llmcalc.model.vision import VisionTower

AttentionSpec = Annotated[Attention, ByKind()]
"""Any attention variant (Attention.all_kinds(): the sparse ones load when a spec names one), picked by its
`kind`."""
FFNSpec = Annotated[FFN, ByKind()]
"""Any FFN variant (FFN.all_kinds()), picked by its `kind`."""
PositionsSpec = Annotated[Positions, ByKind()]
"""Any position encoding (Positions.all_kinds()), picked by its `kind`."""
StackSpec = Annotated[Stack, ByKind()]
"""A decoder (the default) or an encoder (llmcalc/model/stack.py), picked by its `kind`."""
LayerKind = Literal["full", "sliding"]

MAX_LAYERS = 100_000
"""Sanity bound on n_layers (the largest published models have ~200)."""


class LayerGroup(Frozen):
    """`count` layers that share one shape: attention window (None = full) and FFN."""

    count: PosInt
    window: PosInt | None
    ffn: FFNSpec

    @property
    def name(self) -> str:
        attn = f"sliding-window ({self.window}) attention" if self.window else "full attention"
        return f"{attn} + {self.ffn.label}"


class ModelSpec(Frozen):
    """A transformer stack: a causal decoder, or a bidirectional encoder (`stack`, llmcalc/model/stack.py).

    layer_pattern repeats over the layers (["sliding", "full"] alternates, starting with a sliding
    layer); sliding layers attend to the last `sliding_window` tokens. mtp_modules counts DeepSeek-V3
    multi-token-prediction modules, reported apart from the main model.
    """

    name: str
    source: str | None = None
    vocab_size: PosInt
    d_model: PosInt
    n_layers: Annotated[int, Field(gt=0, le=MAX_LAYERS, strict=True)]
    max_seq_len: PosInt
    tie_embeddings: bool
    lm_head_bias: bool = False
    norm: Norm
    positions: PositionsSpec
    attention: AttentionSpec
    ffn: FFNSpec
    sliding_window: PosInt | None = None
    layer_pattern: list[LayerKind] = Field(default_factory=lambda: ["full"], min_length=1)
    mtp_modules: NonNegInt = 0
    stack: StackSpec = Decoder()
    """What the layers are for: a generating decoder (default) or a bidirectional encoder."""
    checkpoint: Checkpoint | None = None
    """How the published checkpoint stores it (formats, stored buffers); None: every tensor in bf16."""
    vision: VisionTower | None = None
    """A vision-language model's image encoder and projector (llmcalc/model/vision.py); None: text only."""

    @model_validator(mode="after")
    def _consistent(self) -> "ModelSpec":
        has_sliding = "sliding" in self.layer_pattern
        if has_sliding and self.sliding_window is None:
            raise ValueError("sliding_window: layer_pattern has sliding layers; set sliding_window (tokens)")
        if self.sliding_window is not None and not has_sliding:
            raise ValueError(
                'layer_pattern: sliding_window is set but no layer is sliding; '
                'add "sliding" to layer_pattern or drop sliding_window'
            )
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
        n_dense = self.ffn.leading_dense_layers
        spans = [(start, min(n_dense, stop), self.ffn.dense_ffn() if n_dense else None),
                 (max(start, n_dense), stop, self.ffn)]
        groups = []
        for start, stop, ffn in spans:
            if ffn is None or stop <= start:
                continue
            sliding = self.sliding_layers(start, stop)
            for count, window in ((stop - start - sliding, None), (sliding, self.sliding_window)):
                if count:
                    groups.append(LayerGroup(count=count, window=window, ffn=ffn))
        return groups


DTYPE_BITS: dict[str, int] = {"fp32": 32, "tf32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4, "fp4": 4}
