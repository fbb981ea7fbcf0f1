"""Weight formats: how a checkpoint stores one weight matrix, as data (FORMATS), and which format each
component of a model keeps (`WeightFormats`). See docs/formats.md.

A matrix of d_in inputs and d_out outputs in a format stores, in bytes (each term 0 where the format has none):

  codes    d_out · ⌈d_in' · bits / w⌉ · w / 8     the weights' codes, packed along the input into words of w bits;
                                                  d_in' = d_in, or d_in rounded up to whole groups (block formats)
  scales   n_scales · scale_bits / 8              n_scales: 1 (tensor), d_out (row), d_out · ⌈d_in / g⌉ (group),
                                                  ⌈d_out / r⌉ · ⌈d_in / g⌉ (block of r × g), ⌈d_in · d_out / g⌉
                                                  (flat: bitsandbytes' blocks over the flattened matrix)
  zeros    ⌈d_in / g⌉ · ⌈d_out · zero_bits / 32⌉ · 4   zero points packed along the output into int32 (GPTQ, AWQ)
  index    d_in · index_bits / 8                  GPTQ's g_idx: the group of every input row (int32)
  bias     d_out · bias_bits / 8                  a bias the format stores for every matrix (AutoGPTQ)
  nested   ⌈n_scales / 256⌉ · 4 + 1024            double quantisation: 8-bit scales with an fp32 scale per 256
                                                  of them and a 256-entry fp32 code map
  fixed    tensor_bytes (+ the JSON quant_state of bitsandbytes 4-bit, its exact length)

GGUF's block types store d_in / g blocks of a fixed size per row: their scales and minima are `scale_bits` per
block. Every figure is an int; partial groups and blocks count whole.
"""

import dataclasses
import difflib
import functools
import json
import re
from collections.abc import Collection
from typing import Annotated, Literal

from pydantic import Field

from llmcalc.errors import UserError, clip
from llmcalc.model.base import MAX_GROUP, Frozen
from llmcalc.model.units import ceil_div, packed_bytes

Scale = Literal["none", "tensor", "row", "group", "block", "flat"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class WeightFormat:
    """One storage format of a weight matrix (the module docstring has the byte formula). Plain data, built once
    per process (a dataclass: no validation cost at start-up)."""

    name: str
    description: str
    bits: int
    """Bits per weight code."""
    scale: Scale = "none"
    group: int | None = None
    """Weights per scale along each row's input (group, block, flat)."""
    group_rows: int = 1
    """Rows (outputs) sharing one scale (block: DeepSeek-V3's 128 × 128)."""
    scale_bits: int = 0
    zero_bits: int = 0
    word_bits: int = 8
    """The word the codes are packed into along the input: 8 (bytes) or 32 (GPTQ's int32)."""
    pad: bool = False
    """Codes fill whole groups: a row of d_in weights stores ⌈d_in / g⌉ whole blocks (GGUF, MX, NV formats)."""
    index_bits: int = 0
    bias_bits: int = 0
    nested: bool = False
    tensor_bytes: int = 0
    quant_state: Literal["", "nf4", "fp4"] = ""
    """bitsandbytes 4-bit: a JSON quant_state (its quant_type) packed into a uint8 tensor per matrix."""
    compute: Literal["fp8", "fp4", "int8"] | None = None
    """The matmul type a GPU with that unit runs this format in natively; None: dequantised to the compute dtype
    (weight-only quantisation)."""
    source: str

    @property
    def quantized(self) -> bool:
        """True for every format but plain fp32 / bf16 / fp16 storage."""
        return self.scale != "none" or self.bits < 16

    @property
    def blockwise(self) -> bool:
        """Whether a scale covers a 2-D block of weights (DeepSeek-V3's 128 × 128), which a native matmul applies
        inside its reduction."""
        return self.scale == "block"

    @property
    def plain_dtype(self) -> str | None:
        """The dtype of a plain (one width, no scales) format, else None."""
        return self.name if self.name in ("fp32", "bf16", "fp16") else None

    def with_group(self, group: int) -> "WeightFormat":
        """The same format with `group` weights per scale (named NAME-gGROUP), 1 to MAX_GROUP."""
        if self.scale not in ("group", "flat"):
            raise UserError(f"`weights_format`: {self.name} has no group size; drop the -g{group}")
        self._fixed_blocks(f"-g{group}")
        base = re.sub(r"-g\d+$", "", self.name)
        if not 1 <= group <= MAX_GROUP:
            raise UserError(f"`weights_format`: {base} with {'no' if group < 1 else f'over {MAX_GROUP:,}'} weights per "
                            f"group; give -g1 to -g{MAX_GROUP}, or -grow for one group per row")
        return dataclasses.replace(self, name=f"{base}-g{group}", group=group)

    def per_row(self) -> "WeightFormat":
        """The same format with one group per row (GPTQ's group_size -1), named NAME-grow."""
        if self.scale != "group":
            raise UserError(f"`weights_format`: {self.name} has no groups; drop the -grow")
        self._fixed_blocks("-grow")
        base = re.sub(r"-g\d+$", "", self.name)
        return dataclasses.replace(self, name=f"{base}-grow", scale="row", group=None)

    def _fixed_blocks(self, suffix: str) -> None:
        """A block format (GGUF, MX, NVFP4: `pad`) stores blocks of the size its layout fixes; no other is allowed."""
        if self.pad:
            raise UserError(f"`weights_format`: {self.name} stores fixed blocks of {self.group} weights; drop the "
                            f"{suffix[:12]}")

    def n_scales(self, d_in: int, d_out: int) -> int:
        g = self.group or 1
        return {"none": 0, "tensor": 1, "row": d_out, "group": d_out * ceil_div(d_in, g),
                "block": ceil_div(d_out, self.group_rows) * ceil_div(d_in, g), "flat": ceil_div(d_in * d_out, g)}[self.scale]

    def matrix_bytes(self, d_in: int, d_out: int, dense: str = "bf16") -> int:
        """Bytes of a d_in × d_out matrix stored in this format (module docstring); `dense`, the checkpoint's
        unquantised dtype, is named in bitsandbytes' quant_state."""
        width = ceil_div(d_in, self.group) * self.group if self.pad else d_in
        codes = d_out * ceil_div(width * self.bits, self.word_bits) * self.word_bits // 8
        n = self.n_scales(d_in, d_out)
        total = codes + packed_bytes(n, self.scale_bits) + self.tensor_bytes
        if self.zero_bits:
            groups = 1 if self.scale == "row" else ceil_div(d_in, (self.group or d_in))
            total += groups * ceil_div(d_out * self.zero_bits, 32) * 4
        total += d_in * self.index_bits // 8 + d_out * self.bias_bits // 8
        if self.nested:
            total += ceil_div(n, 256) * 4 + 1024
        if self.quant_state:
            total += len(self._quant_state(d_in, d_out, dense))
        return total

    def _quant_state(self, d_in: int, d_out: int, dense: str) -> str:
        """bitsandbytes' packed quant_state: json.dumps of its non-tensor fields, as `QuantState.as_dict(packed=True)`
        writes them (the nested offset, a float whose repr takes 17 to 20 characters, is counted as 18)."""
        torch_name = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}[dense]
        state: dict = {"quant_type": self.quant_state, "blocksize": self.group, "dtype": torch_name,
                       "shape": [d_out, d_in]}
        if self.nested:
            state |= {"nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": 2.5650408267974854}
        return json.dumps(state)


def _gptq(bits: int) -> WeightFormat:
    return WeightFormat(
        name=f"gptq-int{bits}-g128", bits=bits, scale="group", group=128, scale_bits=16, zero_bits=bits,
        word_bits=32, index_bits=32, bias_bits=16,
        description=f"GPTQ int{bits} (AutoGPTQ layout): qweight int32-packed along the input, an fp16 scale and a "
                    f"packed int{bits} zero point per group, g_idx (int32 per input row), an fp16 bias per matrix",
        source="AutoGPTQ QuantLinear buffers (qweight, qzeros, scales, g_idx, bias); transformers GPTQ integration")


def _gguf(name: str, bits: int, group: int, block_bytes: int, what: str) -> WeightFormat:
    meta = block_bytes * 8 - bits * group
    return WeightFormat(name=name, bits=bits, scale="group", group=group, scale_bits=meta, pad=True,
                        description=f"GGUF {name.upper()}: blocks of {group} weights in {block_bytes} bytes "
                                    f"({8 * block_bytes / group:g} bits per weight; {what})",
                        source="ggml/src/ggml-common.h block_" + name + " (llama.cpp)")


_FORMATS = [
    WeightFormat(name="fp32", bits=32, description="IEEE float32", source="IEEE 754"),
    WeightFormat(name="bf16", bits=16, description="bfloat16", source="IEEE 754 / Google bfloat16"),
    WeightFormat(name="fp16", bits=16, description="IEEE float16", source="IEEE 754"),
    WeightFormat(name="fp8", bits=8, compute="fp8", description="fp8 codes only, no scale counted "
                 "(`--weights-dtype fp8`; fp8-tensor, fp8-row and fp8-block add theirs)", source="OCP FP8 (e4m3)"),
    WeightFormat(name="int8", bits=8, description="int8 codes only, no scale counted (`--weights-dtype int8`)",
                 source="-"),
    WeightFormat(name="int4", bits=4, scale="group", group=128, scale_bits=16,
                 description="int4 codes with an fp16 scale per group along the input (`--weights-dtype int4`, "
                             "`--group-size`), no zero points", source="symmetric group-wise int4"),
    WeightFormat(name="fp8-tensor", bits=8, scale="tensor", scale_bits=32, compute="fp8",
                 description="fp8 e4m3 with one fp32 scale per matrix (compressed-tensors / ModelOpt FP8)",
                 source="compressed-tensors float-quantized, strategy tensor"),
    WeightFormat(name="fp8-row", bits=8, scale="row", scale_bits=32, compute="fp8",
                 description="fp8 e4m3 with an fp32 scale per output row (FBGEMM rowwise FP8)",
                 source="compressed-tensors float-quantized, strategy channel"),
    WeightFormat(name="fp8-block", bits=8, scale="block", group=128, group_rows=128, scale_bits=32, compute="fp8",
                 description="fp8 e4m3 with an fp32 scale per 128 × 128 block (DeepSeek-V3 weight_scale_inv)",
                 source="DeepSeek-V3 README_WEIGHTS.md; quantization_config weight_block_size [128, 128]"),
    WeightFormat(name="bnb-int8", bits=8, scale="row", scale_bits=32, tensor_bytes=1,
                 description="bitsandbytes LLM.int8: int8 weight, SCB (fp32 per output row) and a 1-byte "
                             "weight_format per matrix", source="bitsandbytes Int8Params state dict"),
    WeightFormat(name="nf4", bits=4, scale="flat", group=64, scale_bits=32, tensor_bytes=64, quant_state="nf4",
                 description="bitsandbytes NF4: 4-bit codes, an fp32 absmax per 64 weights of the flattened "
                             "matrix, a 16-entry fp32 quant_map and the JSON quant_state",
                 source="bitsandbytes Params4bit / QuantState.as_dict(packed=True)"),
    WeightFormat(name="nf4-dq", bits=4, scale="flat", group=64, scale_bits=8, tensor_bytes=64, nested=True,
                 quant_state="nf4",
                 description="bitsandbytes NF4 with double quantisation (QLoRA): 8-bit absmax per 64 weights, "
                             "an fp32 scale per 256 absmax, offset, code maps, JSON quant_state",
                 source="Dettmers et al. 2023 (QLoRA) §2; bitsandbytes QuantState nested_*"),
    WeightFormat(name="bnb-fp4", bits=4, scale="flat", group=64, scale_bits=32, tensor_bytes=64, quant_state="fp4",
                 description="bitsandbytes FP4: as nf4 with the fp4 code map",
                 source="bitsandbytes Params4bit / QuantState.as_dict(packed=True)"),
    WeightFormat(name="bnb-fp4-dq", bits=4, scale="flat", group=64, scale_bits=8, tensor_bytes=64, nested=True,
                 quant_state="fp4", description="bitsandbytes FP4 with double quantisation",
                 source="bitsandbytes QuantState nested_*"),
    WeightFormat(name="awq-int4-g128", bits=4, scale="group", group=128, scale_bits=16, zero_bits=4, word_bits=32,
                 description="AWQ int4 (GEMM layout): qweight and qzeros int32-packed, an fp16 scale and a "
                             "4-bit zero point per group", source="AutoAWQ WQLinear_GEMM buffers"),
    _gptq(2), _gptq(3), _gptq(4), _gptq(8),
    WeightFormat(name="mxfp4", bits=4, scale="group", group=32, scale_bits=8, pad=True, compute="fp4",
                 description="OCP MXFP4: e2m1 codes in blocks of 32 with an e8m0 scale (gpt-oss experts)",
                 source="OCP Microscaling Formats (MX) v1.0; gpt-oss *_blocks / *_scales"),
    WeightFormat(name="nvfp4", bits=4, scale="group", group=16, scale_bits=8, pad=True, tensor_bytes=8,
                 compute="fp4",
                 description="NVFP4: e2m1 codes in blocks of 16 with an e4m3 scale, and two fp32 global scales "
                             "(weight and input) per matrix",
                 source="NVIDIA NVFP4; compressed-tensors nvfp4-pack-quantized"),
    _gguf("q8_0", 8, 32, 34, "an fp16 scale per block"),
    _gguf("q4_0", 4, 32, 18, "an fp16 scale per block"),
    _gguf("q4_1", 4, 32, 20, "an fp16 scale and minimum per block"),
    _gguf("q5_0", 5, 32, 22, "an fp16 scale per block"),
    _gguf("q5_1", 5, 32, 24, "an fp16 scale and minimum per block"),
    _gguf("q2_k", 2, 256, 84, "4-bit sub-block scales and minima"),
    _gguf("q3_k", 3, 256, 110, "6-bit sub-block scales"),
    _gguf("q4_k", 4, 256, 144, "6-bit sub-block scales and minima"),
    _gguf("q5_k", 5, 256, 176, "6-bit sub-block scales and minima"),
    _gguf("q6_k", 6, 256, 210, "8-bit sub-block scales"),
    _gguf("iq4_nl", 4, 32, 18, "non-linear 4-bit codebook"),
    _gguf("iq4_xs", 4, 256, 136, "non-linear codebook, 6-bit sub-block scales"),
    _gguf("iq3_s", 3, 256, 110, "3.44 bits per weight"),
    _gguf("iq3_xxs", 3, 256, 98, "3.06 bits per weight"),
    _gguf("iq2_s", 2, 256, 82, "2.56 bits per weight"),
    _gguf("iq2_xs", 2, 256, 74, "2.31 bits per weight"),
    _gguf("iq2_xxs", 2, 256, 66, "2.06 bits per weight"),
    _gguf("iq1_m", 1, 256, 56, "1.75 bits per weight"),
    _gguf("iq1_s", 1, 256, 50, "1.56 bits per weight"),
]
FORMATS: dict[str, WeightFormat] = {f.name: f for f in _FORMATS}
"""Every format by name; a grouped one also answers to NAME-gN (N weights per group) and NAME-grow."""
FORMATS |= {f.name.removesuffix("-g128"): f for f in _FORMATS if f.name.endswith("-g128")}


def weight_format(name: str) -> WeightFormat:
    """The format called `name` (FORMATS), with an optional -gN (group size) or -grow (one group per row)."""
    key = name.strip().lower()
    if key in FORMATS:
        return FORMATS[key]
    m = re.fullmatch(r"(.+?)-g([0-9]+|row)", key)
    if m and m.group(1) in FORMATS:
        base, digits = FORMATS[m.group(1)], m.group(2)
        if digits == "row":
            return base.per_row()
        # more digits than MAX_GROUP has is over the bound (and int() refuses a number of thousands of digits)
        return base.with_group(int(digits) if len(digits) <= len(str(MAX_GROUP)) else MAX_GROUP + 1)
    names = [f.name for f in _FORMATS]
    near = [n for n in names if n.startswith(key)] or difflib.get_close_matches(key, names, n=3)
    hint = f"did you mean {' or '.join(near[:3])}? " if near else ""
    raise UserError(f"`weights_format`: unknown format {clip(name)!r}; {hint}docs/formats.md lists the {len(names)} "
                    "formats (a grouped one takes -gN or -grow)")


COMPONENTS = ("embedding", "attention", "ffn", "experts", "shared_experts", "router", "norms", "head", "mtp")
"""What `WeightFormats` sets a format for; `default` covers the rest."""


def component_of(path: str) -> str:
    """The component a parameter path belongs to: `ffn/experts` → experts, `attention/q` → attention,
    `ffn/dense_up` → ffn, `lm_head` → head; an MTP module's layer as the layers, its projection `mtp`."""
    if path.startswith("mtp/layer/"):
        return component_of(path.removeprefix("mtp/layer/"))
    head, _, rest = path.partition("/")
    if head == "ffn":
        return rest if rest in ("experts", "shared_experts", "router") else "ffn"
    return {"lm_head": "head"}.get(head, head)


class WeightFormats(Frozen):
    """The format of each component's weight matrices (`default` for the ones not named) and the dtype of what
    no quantiser touches (norms, biases, a quantised component's other parameters: `dense`)."""

    default: str = "bf16"
    components: dict[str, str] = {}
    dense: Literal["fp32", "bf16", "fp16"] = "bf16"

    def model_post_init(self, _context) -> None:
        for comp, name in (("default", self.default), *self.components.items()):
            if comp != "default" and comp not in COMPONENTS:
                raise UserError(f"`weights_format`: unknown component {comp!r}; use default or one of "
                                f"{', '.join(COMPONENTS)}")
            weight_format(name)

    @classmethod
    def parse(cls, text: str, dense: str = "bf16") -> "WeightFormats":
        """`experts=mxfp4,default=bf16` (or one format name for every matrix)."""
        default, comps, seen = "bf16", {}, set()
        items = [p.strip() for p in text.split(",")]
        if not all(items):  # an empty item (a stray comma) or nothing at all: a typo, never read as bf16
            raise UserError(f"`weights_format`: {text!r} has an empty item; give COMPONENT=FORMAT items (or one "
                            "format) separated by single commas, e.g. experts=mxfp4,attention=fp8")
        for item in items:
            comp, eq, name = item.partition("=")
            if not eq:
                comp, name = "default", comp
            comp = comp.strip()
            if comp in comps or (comp == "default" and "default" in seen):
                raise UserError(f"`weights_format`: {comp} is given twice in {text!r}; give each component once")
            seen.add(comp)
            if comp == "default":
                default = name.strip()
            else:
                comps[comp] = name.strip()
        return cls(default=default, components=comps, dense=dense)

    @classmethod
    @functools.lru_cache(maxsize=64)
    def of_dtype(cls, dtype: str, group_size: int = 128) -> "WeightFormats":
        """`--weights-dtype`: 16/32-bit stores every parameter so; fp8, int8, int4 (group_size per fp16 scale)
        quantise the layers' matrices and keep the embedding, head and norms in bf16."""
        if dtype in ("fp32", "bf16", "fp16"):
            return cls(default=dtype, dense=dtype)
        name = f"int4-g{group_size}" if dtype == "int4" else dtype
        return cls(default=name, components={"embedding": "bf16", "head": "bf16", "norms": "bf16"})

    def of(self, component: str) -> WeightFormat:
        """The format of a component (COMPONENTS) or of a parameter path (component_of)."""
        comp = component if component in COMPONENTS else component_of(component)
        name = self.components.get(comp)
        if name is None and comp == "shared_experts":
            name = self.components.get("ffn")
        return weight_format(name or self.default)

    @property
    def quantized(self) -> bool:
        """Any component in a quantised format."""
        return any(weight_format(n).quantized for n in (self.default, *self.components.values()))

    @property
    def label(self) -> str:
        """`bf16`, or `bf16; experts mxfp4`, or `gptq-int4-g128; embedding, head, norms fp16`: the default format,
        then the components kept in another, by format (every component named; label_for names a model's)."""
        return self.label_for(None)

    def label_for(self, has: Collection[str] | None) -> str:
        """The label naming only the components in `has` (those a model has parameters in): a checkpoint's
        formats name every component its family may have, `mtp` and `router` of a dense model included."""
        by_format: dict[str, list[str]] = {}
        for comp, name in self.components.items():
            if name != self.default and (has is None or comp in has):
                by_format.setdefault(name, []).append(comp)
        return "; ".join([self.default] + [f"{', '.join(c)} {n}" for n, c in by_format.items()])


class Checkpoint(Frozen):
    """How a published checkpoint stores the model, for its size (`llmcalc params --bytes`); memory and time use
    the workload's formats, which default to these."""

    formats: WeightFormats = Field(default_factory=WeightFormats)  # built when used, not at import
    rotary_buffers: bool = False
    """Each layer stores RoPE's inv_freq (fp32, d_rot / 2): transformers before 4.31 saved it as a buffer."""
    router_buffers: bool = False
    """Each MoE layer stores an fp32 bias per routed expert (DeepSeek-V3's e_score_correction_bias, `noaux_tc`)."""
    mtp_copies: bool = False
    """Each MTP module stores its own copy of the token embedding and of the head (DeepSeek-V3's layer 61)."""
    kept: list[str] = []
    """What the quantisation config keeps unquantised, as it names it (modules_to_not_convert, ignored_layers)."""
    kv_dtype: Literal["fp8", "int8"] | None = None
    """The KV cache dtype the checkpoint states, with the scales it ships for it (ModelOpt's kv_cache_quant_algo,
    compressed-tensors' kv_cache_scheme): an engine whose default cache dtype takes it (Engine.checkpoint_kv) runs
    its cache so. None: none stated, or one no KV dtype here stands for (NVFP4)."""
    kv_quantizer: Literal["modelopt", "compressed-tensors"] | None = None
    """The quantisation config that states kv_dtype (engines take one and not the other)."""
    index_total_size: Annotated[int, Field(ge=0, le=2**62, strict=True)] | None = None
    """`metadata.total_size` of the checkpoint's `model.safetensors.index.json` where its folder or Hub repository
    holds one: the tensors' bytes as published, shown beside llmcalc's own count as a cross-check; None: no index."""
