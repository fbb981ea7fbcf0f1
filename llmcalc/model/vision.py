"""The vision tower of a vision-language model: a ViT encoder over image patches and the projector that turns
its output into the language model's image tokens. See docs/vision.md.

Letters: p patch side (pixels), C channels, t frames per patch (Qwen2.5-VL repeats an image into t = 2 frames),
g_h × g_w the patch grid, n = g_h·g_w (+1 with a class token) the tokens the encoder runs on, d its width,
f its MLP width, D the language model's width, m the patch merger's side.

  params   = C·t·p²·d (+d bias) + class d + positions (n_native·d) + norms + L·(4·d² + 4·d + MLP + 2 norms)
             + projector
  FLOPs    = 2·n_p·C·t·p²·d + Σ_layers [2·n·4·d² + 2·n·(2|3)·d·f + 4·pairs·d] + projector   (per image)
  pairs    = n² (full attention, bidirectional), or Σ over windows of (window tokens)² (window attention)
"""

import math
from typing import Annotated, ClassVar, Literal

from pydantic import BeforeValidator, Field, SerializeAsAny, model_validator

from llmcalc.errors import UserError
from llmcalc.model.attention import linear
from llmcalc.model.base import ByKind, Frozen, Parts, PosInt, Variant
from llmcalc.model.ffn import Activation, mlp_params
from llmcalc.model.units import MAC, ceil_div


def norm_params(kind: str, n: int) -> int:
    """One norm over n features: LayerNorm with a bias 2n, RMSNorm n."""
    return 2 * n if kind == "layernorm" else n


class Projector(Variant):
    """How the encoder's patch features become image tokens of the language model's width D. Subclassing
    registers a new `kind` (llmcalc/model/base.py). A variant gives grid_multiple, tokens, params and matmuls."""

    kinds: ClassVar[dict[str, type[Variant]]] = {}
    variant_modules: ClassVar[dict[str, str]] = {
        "mlp": "llmcalc.model.vision", "pool": "llmcalc.model.vision", "merger": "llmcalc.model.vision",
        "linear": "llmcalc.model.vision", "downsample": "llmcalc.model.vision",
        "pixel_shuffle": "llmcalc.model.vision", "internvl": "llmcalc.model.vision"}
    """Each kind's module, imported when a spec names the kind (Variant)."""
    label: ClassVar[str] = ""

    @property
    def grid_multiple(self) -> int:
        """The patch grid's sides must be multiples of this (1: any grid)."""
        return 1

    def tokens(self, grid_h: int, grid_w: int) -> int:
        """Image tokens one image of a g_h × g_w patch grid gives the language model."""
        raise NotImplementedError

    def params(self, d_vision: int, d_text: int) -> Parts:
        """Parameters by component."""
        raise NotImplementedError

    def matmuls(self, d_vision: int, d_text: int) -> Parts:
        """Weights each image token is multiplied by, per matmul (its FLOPs: 2 · tokens · weights)."""
        raise NotImplementedError

    def explain_params(self) -> dict[str, str]:
        """params as text over d_img (the tower's width), d (the language model's) and the projector's symbols."""
        raise NotImplementedError

    def activation_elements(self, encoder: int, d_vision: int, d_text: int, tokens: int) -> int:
        """Elements one image holds at the projector's peak, the encoder's output (`encoder` × d) included."""
        raise NotImplementedError

    def explain_symbols(self) -> dict[str, int]:
        """The projector's own explain symbols (none)."""
        return {}

    def kept_elements(self, d_text: int, tokens: int) -> int:
        """Elements one image's projector outputs keep from inside the encoder to its end (DeepStack's): none."""
        return 0

    def explain_kept(self) -> str:
        """kept_elements as text ("": none)."""
        return ""

    def explain_matmuls(self) -> dict[str, str]:
        """Weights each image token is multiplied by, per matmul, as text (matmuls)."""
        return {k: v.removesuffix(" + d").removesuffix(" + (m_img · m_img · d_img)")
                for k, v in self.explain_params().items() if k in self.matmuls(1, 1)}


class MLPProjector(Projector):
    """LLaVA-1.5: Linear(d → D) + activation + Linear(D → D), with biases, on every patch (the class token is
    dropped: vision_feature_select_strategy "default")."""

    kind: Literal["mlp"] = "mlp"
    activation: Activation = "gelu"
    label: ClassVar[str] = "2-layer MLP"

    def tokens(self, grid_h: int, grid_w: int) -> int:
        """g_h · g_w: one token per patch."""
        return grid_h * grid_w

    def params(self, d_vision: int, d_text: int) -> Parts:
        """linear_1 d·D + D, linear_2 D·D + D."""
        return {"linear_1": linear(d_vision, d_text, True), "linear_2": linear(d_text, d_text, True)}

    def matmuls(self, d_vision: int, d_text: int) -> Parts:
        return {"linear_1": d_vision * d_text, "linear_2": d_text * d_text}

    def explain_params(self) -> dict[str, str]:
        return {"linear_1": "d_img · d + d", "linear_2": "d · d + d"}

    def activation_elements(self, encoder: int, d_vision: int, d_text: int, tokens: int) -> int:
        """n·d + 2·T·D: the encoder's output, then linear_1's output and its activation (then that and linear_2's)."""
        return encoder * d_vision + 2 * tokens * d_text


class PoolProjector(Projector):
    """Gemma 3: the patch grid average-pooled to √T × √T tokens (kernel g / √T), an RMSNorm over d, then one
    Linear(d → D) without a bias."""

    kind: Literal["pool"] = "pool"
    tokens_per_image: PosInt
    label: ClassVar[str] = "average pool + linear"

    @model_validator(mode="after")
    def _square(self) -> "PoolProjector":
        if math.isqrt(self.tokens_per_image) ** 2 != self.tokens_per_image:
            raise ValueError(f"vision.projector.tokens_per_image: {self.tokens_per_image} is not a square; give "
                             "one (256 = 16 × 16)")
        return self

    @property
    def side(self) -> int:
        return math.isqrt(self.tokens_per_image)

    @property
    def grid_multiple(self) -> int:
        """The grid pools by a whole kernel: its sides are multiples of √T."""
        return self.side

    def tokens(self, grid_h: int, grid_w: int) -> int:
        """T, whatever the grid (the pooling kernel is g / √T)."""
        return self.tokens_per_image

    def params(self, d_vision: int, d_text: int) -> Parts:
        """RMSNorm d, projection d·D."""
        return {"norm": d_vision, "linear": d_vision * d_text}

    def matmuls(self, d_vision: int, d_text: int) -> Parts:
        return {"linear": d_vision * d_text}

    def explain_params(self) -> dict[str, str]:
        return {"norm": "d_img", "linear": "d_img · d"}

    def activation_elements(self, encoder: int, d_vision: int, d_text: int, tokens: int) -> int:
        """n·d + 2·T·d + T·D: the encoder's output, the pooled grid, its normed copy and the projection."""
        return encoder * d_vision + 2 * tokens * d_vision + tokens * d_text


class BlockMergingProjector(Projector):
    """A projector that turns each m × m block of the tower's patch grid into one image token: the grid must be a
    multiple of m, and an image of g_h × g_w patches gives (g_h / m) · (g_w / m) tokens."""

    merge: PosInt = 2

    @property
    def grid_multiple(self) -> int:
        return self.merge

    def tokens(self, grid_h: int, grid_w: int) -> int:
        """(g_h / m) · (g_w / m)."""
        return (grid_h // self.merge) * (grid_w // self.merge)


class MergerProjector(BlockMergingProjector):
    """Qwen2.5-VL's and Qwen3-VL's patch merger: a norm over d (Qwen2.5-VL RMSNorm, Qwen3-VL LayerNorm with a
    bias), each m × m block of patches concatenated (m²·d), then Linear(m²d → m²d) + GELU + Linear(m²d → D), with
    biases. Qwen3-VL's DeepStack adds one more merger per layer of `deepstack_layers`, run on that encoder layer's
    output with its norm after the concatenation (over m²·d); each one's image tokens are added to the language
    model's hidden states after one of its first layers (element-wise: no matmul)."""

    kind: Literal["merger"] = "merger"
    merge: PosInt = 2
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    deepstack_layers: list[Annotated[int, Field(ge=0, strict=True)]] = Field(default_factory=list)
    """Encoder layers (0-based) whose output a DeepStack merger turns into image tokens (Qwen3-VL: 3 of them)."""
    label: ClassVar[str] = "m×m patch merger + MLP"

    def params(self, d_vision: int, d_text: int) -> Parts:
        """norm d (LayerNorm 2d), fc1 (m²d)² + m²d, fc2 m²d·D + D; each DeepStack merger the same with its norm
        over m²d."""
        wide, k = self.merge**2 * d_vision, len(self.deepstack_layers)
        out = {"norm": norm_params(self.norm, d_vision), "fc1": linear(wide, wide, True),
               "fc2": linear(wide, d_text, True)}
        if k:
            out |= {"deepstack/norm": k * norm_params(self.norm, wide), "deepstack/fc1": k * linear(wide, wide, True),
                    "deepstack/fc2": k * linear(wide, d_text, True)}
        return out

    def matmuls(self, d_vision: int, d_text: int) -> Parts:
        wide, k = self.merge**2 * d_vision, len(self.deepstack_layers)
        out = {"fc1": wide * wide, "fc2": wide * d_text}
        if k:
            out |= {"deepstack/fc1": k * wide * wide, "deepstack/fc2": k * wide * d_text}
        return out

    def explain_params(self) -> dict[str, str]:
        wide = "(m_img · m_img · d_img)"
        norm = "2 · d_img" if self.norm == "layernorm" else "d_img"
        out = {"norm": norm, "fc1": f"{wide} · {wide} + {wide}", "fc2": f"{wide} · d + d"}
        if self.deepstack_layers:
            wide_norm = f"2 · {wide}" if self.norm == "layernorm" else wide
            out |= {"deepstack/norm": f"k_ds · {wide_norm}", "deepstack/fc1": f"k_ds · ({wide} · {wide} + {wide})",
                    "deepstack/fc2": f"k_ds · ({wide} · d + d)"}
        return out

    def explain_matmuls(self) -> dict[str, str]:
        wide = "(m_img · m_img · d_img)"
        out = {"fc1": f"{wide} · {wide}", "fc2": f"{wide} · d"}
        if self.deepstack_layers:
            out |= {"deepstack/fc1": f"k_ds · {wide} · {wide}", "deepstack/fc2": f"k_ds · {wide} · d"}
        return out

    def explain_symbols(self) -> dict[str, int]:
        return {"m_img": self.merge} | ({"k_ds": len(self.deepstack_layers)} if self.deepstack_layers else {})

    def activation_elements(self, encoder: int, d_vision: int, d_text: int, tokens: int) -> int:
        """The encoder's output n·d, its normed copy, the m × m blocks gathered (a copy) and fc1's output, each
        N·d wide (N = T·m² patches); then fc2's output T·D beside three of them."""
        wide = tokens * self.merge**2 * d_vision
        return encoder * d_vision + max(3 * wide, 2 * wide + tokens * d_text)

    def kept_elements(self, d_text: int, tokens: int) -> int:
        """The k DeepStack mergers' outputs, k·T·D, each kept from its layer until the language model reads it."""
        return len(self.deepstack_layers) * tokens * d_text

    def explain_kept(self) -> str:
        return "k_ds · T_img · d" if self.deepstack_layers else ""


class DownsampleProjector(BlockMergingProjector):
    """GLM-4V's (transformers' Glm4vVisionModel): each m × m block of patches through a Conv2d of kernel and stride m
    (d → D, with a bias: m²·d·D + D), then the merger: Linear(D → D) without a bias, a LayerNorm over D, GELU, and a
    gated MLP of width `context` (gate and up D → C, down C → D, no biases, the tower's activation)."""

    kind: Literal["downsample"] = "downsample"
    merge: PosInt = 2
    context: PosInt
    """The merger MLP's width C (GLM-4V's vision intermediate_size)."""
    activation: Activation = "silu"
    label: ClassVar[str] = "m×m conv + gated MLP"

    def params(self, d_vision: int, d_text: int) -> Parts:
        """downsample m²·d·D + D, proj D·D, norm 2·D, gate and up D·C each, down C·D."""
        d, c = d_text, self.context
        return {"downsample": linear(self.merge**2 * d_vision, d, True), "proj": d * d, "norm": 2 * d,
                "gate": d * c, "up": d * c, "down": c * d}

    def matmuls(self, d_vision: int, d_text: int) -> Parts:
        d, c = d_text, self.context
        return {"downsample": self.merge**2 * d_vision * d, "proj": d * d, "gate": d * c, "up": d * c, "down": c * d}

    def explain_params(self) -> dict[str, str]:
        return {"downsample": "m_img · m_img · d_img · d + d", "proj": "d · d", "norm": "2 · d", "gate": "d · f_proj",
                "up": "d · f_proj", "down": "f_proj · d"}

    def explain_symbols(self) -> dict[str, int]:
        return {"m_img": self.merge, "f_proj": self.context}

    def activation_elements(self, encoder: int, d_vision: int, d_text: int, tokens: int) -> int:
        """The encoder's output n·d (and its m × m blocks regrouped, a copy), then over the T tokens: the conv's,
        proj's, the norm's and GELU's outputs (T·D each) give way to the MLP's gate, up, the activated gate and
        their product (T·C each) beside GELU's output; the encoder's output is held throughout."""
        return 2 * encoder * d_vision + max(3 * tokens * d_text, tokens * d_text + 3 * tokens * self.context)


ProjectorSpec = Annotated[Projector, ByKind()]


class VisionTower(Frozen):
    """A ViT encoder (pre-norm blocks: attention with 4 d×d projections, an MLP) and its projector.

    resize: fixed (the processor resizes every image to image_size², LLaVA and Gemma 3) or dynamic (Qwen2.5-VL's
    smart_resize: each side rounded to a multiple of p·m, the area kept within [min_pixels, max_pixels]);
    image_size is then the default side. window: the side, in patches, of the attention windows of every layer
    not in full_layers (Qwen2.5-VL: 112 px / 14 = 8); None: every layer attends to the whole image.
    """

    kind: Literal["vit", "tiled", "llama4", "internvl"] = "vit"
    image_size: PosInt
    resize: Literal["fixed", "dynamic"] = "fixed"
    min_pixels: PosInt | None = None
    max_pixels: PosInt | None = None
    patch_size: PosInt
    channels: PosInt = 3
    frames_per_patch: PosInt = 1
    patch_bias: bool
    class_token: bool = False
    learned_positions: bool = True
    """A learned table of (native patches + class token) × d; False: rotary positions (no parameters)."""
    position_rows: PosInt | None = None
    """Rows of the learned table when it is not the native grid's (Qwen3-VL: 2,304 = 48², resampled bilinearly to
    each image's grid, element-wise work); None: native patches + class token."""
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    pre_norm: bool = False
    post_norm: bool = True
    d_model: PosInt
    n_layers: Annotated[int, Field(gt=0, le=10_000, strict=True)]
    heads: PosInt
    d_ff: PosInt
    gated: bool = False
    activation: Activation = "gelu"
    bias: bool = True
    """Biases on the attention projections and the MLP."""
    window: PosInt | None = None
    full_layers: list[int] = Field(default_factory=list)
    projector: ProjectorSpec
    check_images: ClassVar[object] = None
    """A tower whose images a workload may not set (a method raising UserError with the fix); None: any."""
    referenced: ClassVar[bool] = True
    """Whether the reference model (llmcalc/reference/vision.py) builds this tower; validate leaves out, with a note,
    the vision rows of one it does not."""
    in_prompt: ClassVar[bool] = True
    """Whether its image tokens are part of the prompt (LLaVA, Gemma 3, Qwen2.5-VL); False: cross-attention layers
    read them from a cache of their own (Llama 3.2 Vision), sized by the workload's images (ModelSpec.for_images)."""
    explain_legend: ClassVar[dict[str, str]] = {
        "L_img": "vision encoder layers", "d_img": "vision encoder width", "f_img": "vision encoder MLP width",
        "px": "pixel values per patch: channels · frames per patch · patch_size²",
        "n_pos": "learned vision positions: native patches (+1 class token)", "m_img": "patch merger side",
        "f_proj": "the GLM-4V merger MLP's width",
        "N_p": "patches of one image after the processor's resize", "n_img": "tokens the encoder runs on: N_p (+1 "
        "class token)", "T_img": "image tokens one image gives the language model", "I": "images per sequence",
        "k_ds": "DeepStack mergers (Qwen3-VL)", "P_img": "(query, key) pairs of one image over the encoder's layers: Σ_layers n² (full) or Σ_windows n_w²",
        "m_proj": "elements one image holds at the projector's peak (Projector.activation_elements)"}

    @model_validator(mode="after")
    def _consistent(self) -> "VisionTower":
        if self.d_model % self.heads:
            raise ValueError(f"vision.heads: {self.heads} does not divide vision.d_model {self.d_model}; "
                             "give a divisor")
        if self.image_size % self.patch_size:
            raise ValueError(f"vision.image_size: {self.image_size} is not a multiple of vision.patch_size "
                             f"{self.patch_size}; give a multiple")
        if self.resize == "dynamic" and (self.min_pixels is None or self.max_pixels is None):
            raise ValueError("vision.resize: dynamic resizing needs vision.min_pixels and vision.max_pixels; add them")
        if any(not 0 <= i < self.n_layers for i in self.full_layers):
            raise ValueError(f"vision.full_layers: give layer indices in 0..{self.n_layers - 1}")
        if self.full_layers and self.window is None:
            raise ValueError("vision.full_layers: only window attention has full layers apart; set vision.window")
        if any(i >= self.n_layers for i in getattr(self.projector, "deepstack_layers", ())):
            raise ValueError(f"vision.projector.deepstack_layers: give layer indices in 0..{self.n_layers - 1}")
        if self.position_rows is not None and not self.learned_positions:
            raise ValueError("vision.position_rows: only a learned position table has rows; drop it or set "
                             "vision.learned_positions")
        self.grid(self.image_size, self.image_size)
        return self

    # ── the image ────────────────────────────────────────────────────────────────────────────────
    def grid(self, height: int, width: int) -> tuple[int, int]:
        """The patch grid (g_h, g_w) of an image of height × width pixels after the processor's resize.

        fixed: (image_size / p)², whatever the input. dynamic (Qwen2-VL's smart_resize, factor F = p·m): each
        side rounded to the nearest multiple of F (Python's round, ties to even); above max_pixels both shrink by
        β = √(H·W / max_pixels) and floor to F, below min_pixels both grow by β = √(min_pixels / (H·W)) and
        ceil to F."""
        p = self.patch_size
        if self.resize == "fixed":
            side = self.image_size // p
            if side % self.projector.grid_multiple:
                raise ValueError(f"vision.image_size: a {side}×{side} patch grid does not divide into the "
                                 f"projector's {self.projector.grid_multiple}×{self.projector.grid_multiple} blocks")
            return side, side
        f = p * self.projector.grid_multiple
        if max(height, width) / min(height, width) > 200:
            raise ValueError(f"image_size: {height}×{width} has an aspect ratio above 200, which the processor "
                             "refuses; give a squarer image")
        h, w = round(height / f) * f, round(width / f) * f
        if h * w > self.max_pixels:
            beta = math.sqrt(height * width / self.max_pixels)
            h, w = max(f, math.floor(height / beta / f) * f), max(f, math.floor(width / beta / f) * f)
        elif h * w < self.min_pixels:
            beta = math.sqrt(self.min_pixels / (height * width))
            h, w = math.ceil(height * beta / f) * f, math.ceil(width * beta / f) * f
        return h // p, w // p

    def tokens(self, height: int, width: int) -> int:
        """Image tokens the language model receives for one image (the projector's count over the grid)."""
        return self.projector.tokens(*self.grid(height, width))

    def sequence(self, height: int, width: int) -> int:
        """Tokens the encoder runs on: g_h · g_w patches, +1 class token."""
        gh, gw = self.grid(height, width)
        return gh * gw + self.class_token

    def pairs(self, height: int, width: int) -> dict[str, int]:
        """(query, key) pairs of one layer by attention kind: full n²; window Σ_windows (h_i·w_j)² =
        (Σ h_i²)(Σ w_j²), the grid cut into window × window tiles from the top-left (the last row and column
        of tiles keep the remainder)."""
        n = self.sequence(height, width)
        out = {"full": n * n}
        if self.window is not None:
            gh, gw = self.grid(height, width)
            out["window"] = _squares(gh, self.window) * _squares(gw, self.window)
        return out

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads

    @property
    def window_layers(self) -> int:
        """Layers that attend within windows (the rest attend to the whole image)."""
        return 0 if self.window is None else self.n_layers - len(set(self.full_layers))

    @property
    def positions(self) -> int:
        """Rows of the learned position table: position_rows, else the native patches (+1 class token)."""
        if self.position_rows is not None:
            return self.position_rows
        return (self.image_size // self.patch_size) ** 2 + self.class_token

    @property
    def patch_inputs(self) -> int:
        """Pixel values one patch embeds: C · t · p²."""
        return self.channels * self.frames_per_patch * self.patch_size**2

    # ── parameters ───────────────────────────────────────────────────────────────────────────────
    def layer_params(self) -> Parts:
        """One encoder layer by component: q, k, v, o (d² each, +d with biases), the MLP, two norms."""
        d = self.d_model
        parts = {f"attention/{k}": linear(d, d, self.bias) for k in ("q", "k", "v", "o")}
        parts |= {f"mlp/{k}": v for k, v in mlp_params(d, self.d_ff, gated=self.gated, bias=self.bias).items()}
        return parts | {"norms/layer": 2 * norm_params(self.norm, d)}

    def params(self, d_text: int) -> Parts:
        """Every parameter of the tower and its projector, by component path (vision/…, projector/…)."""
        d = self.d_model
        parts = {"vision/patch_embedding": self.patch_inputs * d + (d if self.patch_bias else 0)}
        if self.class_token:
            parts["vision/class_embedding"] = d
        if self.learned_positions:
            parts["vision/position_embedding"] = self.positions * d
        parts |= {f"vision/layers/{k}": self.n_layers * v for k, v in self.layer_params().items()}
        norms = (self.pre_norm + self.post_norm) * norm_params(self.norm, d)
        if norms:
            parts["vision/norms/outer"] = norms
        return parts | {f"projector/{k}": v for k, v in self.projector.params(d, d_text).items()}

    def explain_symbols(self) -> dict[str, int]:
        """The tower's explain symbols (explain_legend) and its projector's."""
        return {"L_img": self.n_layers, "d_img": self.d_model, "f_img": self.d_ff, "px": self.patch_inputs,
                "n_pos": self.positions} | self.projector.explain_symbols()

    def explain_params(self) -> dict[str, str]:
        """params as text, component by component (d: the language model's width)."""
        bias = " + d_img" if self.bias else ""
        out = {"vision/patch_embedding": "px · d_img" + (" + d_img" if self.patch_bias else "")}
        if self.class_token:
            out["vision/class_embedding"] = "d_img"
        if self.learned_positions:
            out["vision/position_embedding"] = "n_pos · d_img"
        out |= {f"vision/layers/attention/{k}": f"L_img · (d_img · d_img{bias})" for k in ("q", "k", "v", "o")}
        ins = ("gate", "up") if self.gated else ("up",)
        out |= {f"vision/layers/mlp/{k}": f"L_img · (d_img · f_img{' + f_img' if self.bias else ''})" for k in ins}
        out["vision/layers/mlp/down"] = f"L_img · (f_img · d_img{bias})"
        per_norm = "2 · d_img" if self.norm == "layernorm" else "d_img"
        out["vision/layers/norms/layer"] = f"L_img · 2 · {per_norm}"
        if self.pre_norm + self.post_norm:
            out["vision/norms/outer"] = f"{self.pre_norm + self.post_norm} · {per_norm}"
        return out | {f"projector/{k}": v for k, v in self.projector.explain_params().items()}

    # ── FLOPs ────────────────────────────────────────────────────────────────────────────────────
    def flops(self, height: int, width: int, d_text: int) -> Parts:
        """Matmul FLOPs (a multiply-add is 2) of one image through the tower and the projector, by component:
        patch embedding 2·n_p·C·t·p²·d; per layer 2·n·d² for each of q, k, v, o, 2·n·d·f per MLP matrix, the
        core 2·pairs·d for QKᵀ and again for AV (bidirectional: every pair, no causal halving); the projector
        2 · its tokens · its weights. Norms, activations, softmax and pooling are element-wise, not counted."""
        gh, gw = self.grid(height, width)
        d, n, pairs = self.d_model, self.sequence(height, width), self.pairs(height, width)
        out = {"vision/patch_embedding": MAC * gh * gw * self.patch_inputs * d}
        for k in ("q", "k", "v", "o"):
            out[f"vision/layers/attention/{k}"] = self.n_layers * MAC * n * d * d
        core = (self.n_layers - self.window_layers) * pairs["full"] + self.window_layers * pairs.get("window", 0)
        out["vision/layers/attention/core_qk"] = MAC * core * d
        out["vision/layers/attention/core_av"] = MAC * core * d
        for k in mlp_params(d, self.d_ff, gated=self.gated, bias=False):
            out[f"vision/layers/mlp/{k}"] = self.n_layers * MAC * n * d * self.d_ff
        tokens = self.projector.tokens(gh, gw)
        return out | {f"projector/{k}": MAC * tokens * w for k, w in self.projector.matmuls(d, d_text).items()}

    def explain_image_symbols(self, height: int, width: int, d_text: int) -> dict[str, int]:
        """The per-image explain symbols of an image of height × width pixels: N_p, n_img, T_img, P_img, m_proj."""
        gh, gw = self.grid(height, width)
        pairs, n, tokens = self.pairs(height, width), self.sequence(height, width), self.tokens(height, width)
        core = (self.n_layers - self.window_layers) * pairs["full"] + self.window_layers * pairs.get("window", 0)
        return {"N_p": gh * gw, "n_img": n, "T_img": tokens, "P_img": core,
                "m_proj": self.projector.activation_elements(n, self.d_model, d_text, tokens)}

    def explain_flops(self) -> dict[str, str]:
        """flops as text for one image, component by component (symbols: explain_image_symbols)."""
        out = {"vision/patch_embedding": "2 · N_p · px · d_img"}
        out |= {f"vision/layers/attention/{k}": "2 · L_img · n_img · d_img · d_img" for k in ("q", "k", "v", "o")}
        out |= {f"vision/layers/attention/core_{k}": "2 · P_img · d_img" for k in ("qk", "av")}
        for k in mlp_params(1, 1, gated=self.gated, bias=False):
            out[f"vision/layers/mlp/{k}"] = "2 · L_img · n_img · d_img · f_img"
        return out | {f"projector/{k}": f"2 · T_img · {w}" for k, w in self.projector.explain_matmuls().items()}

    def explain_activations(self) -> str:
        """activation_bytes as text over a (bytes per element) and explain_image_symbols."""
        mlp = "3 · f_img" if self.gated else "2 · f_img"
        kept = f"{self.projector.explain_kept()} + " if self.projector.explain_kept() else ""
        return f"a · (N_p · px + {kept}max(n_img · 7 · d_img, n_img · (3 · d_img + {mlp}), m_proj))"

    # ── activations ──────────────────────────────────────────────────────────────────────────────
    def activation_bytes(self, height: int, width: int, d_text: int, act: int) -> int:
        """Bytes one image holds at the tower's peak (its weights apart), elements of `act` bytes, attention on
        a flash kernel (SDPA: no n × n scores). The pixel values N·P are held throughout (the caller keeps
        them); beside them the largest stage of:
          an attention layer, n·7·d: the layer's input, the normed input, q, k, v, the kernel's output and its
            (n, d) copy with the heads gathered (window layers hold no more than a full one);
          an MLP, n·(3·d + 2·f) (gated 3·f): the layer's input, the residual after attention, the normed input,
            the first matrix's output and its activation (gated: the activated gate, up and their product);
          the projector (Projector.activation_elements), over the encoder's output;
        and the projector's outputs made inside the encoder and kept to its end (Qwen3-VL's DeepStack, k·T·D).
        B sequences of `images` images, encoded as one batch, hold B · images times this."""
        gh, gw = self.grid(height, width)
        n, d, f = self.sequence(height, width), self.d_model, self.d_ff
        tokens = self.projector.tokens(gh, gw)
        layer = n * max(7 * d, 3 * d + (3 if self.gated else 2) * f)
        head = self.projector.activation_elements(n, d, d_text, tokens)
        kept = self.projector.kept_elements(d_text, tokens)
        return act * (gh * gw * self.patch_inputs + kept + max(layer, head))

    @property
    def label(self) -> str:
        attn = f"window {self.window} + {len(self.full_layers)} full layers" if self.window else "full attention"
        return f"ViT {self.n_layers}×{self.d_model}, patch {self.patch_size}, {attn}, {self.projector.label}"


def _squares(side: int, window: int) -> int:
    """Σ of the squared tile sizes when `side` is cut into tiles of `window` from the start: q·w² + r²."""
    q, r = divmod(side, window)
    return q * window * window + r * r


class LinearProjector(Projector):
    """Llama 3.2 Vision (mllama): the encoder's last output and `concat` − 1 intermediate layers' outputs
    concatenated per token (concat·d), one Linear(concat·d → D) with a bias, on every token of every tile (class
    token included)."""

    kind: Literal["linear"] = "linear"
    concat: PosInt = 1
    label: ClassVar[str] = "concatenated layers + linear"

    def tokens(self, grid_h: int, grid_w: int) -> int:
        """g_h · g_w: one token per patch (the tower adds the class token and the tiles)."""
        return grid_h * grid_w

    def params(self, d_vision: int, d_text: int) -> Parts:
        """c·d·D + D."""
        return {"linear": linear(self.concat * d_vision, d_text, True)}

    def matmuls(self, d_vision: int, d_text: int) -> Parts:
        return {"linear": self.concat * d_vision * d_text}

    def explain_params(self) -> dict[str, str]:
        return {"linear": "c_img · d_img · d + d"}

    def explain_symbols(self) -> dict[str, int]:
        return {"c_img": self.concat}

    def explain_matmuls(self) -> dict[str, str]:
        return {"linear": "c_img · d_img · d"}

    def activation_elements(self, encoder: int, d_vision: int, d_text: int, tokens: int) -> int:
        """The concatenated features c·n·d and the projection n·D."""
        return self.concat * encoder * d_vision + tokens * d_text


def tile_grid(height: int, width: int, tile: int, max_tiles: int) -> tuple[int, int]:
    """(rows, columns) of tiles Llama 3.2 Vision's processor cuts an image of height × width pixels into: of every
    canvas of r × c tiles with r·c ≤ max_tiles, the image fits at scale s = min(r·tile / height, c·tile / width);
    the smallest s ≥ 1 is taken (the least upscaling), else the largest s < 1 (the least downscaling); among
    canvases at that scale, the smallest area. Exact arithmetic (fractions), as the processor's floats give
    for every size tested (tests/test_vision.py)."""
    from fractions import Fraction

    shapes = [(r, c) for r in range(1, max_tiles + 1) for c in range(1, max_tiles + 1) if r * c <= max_tiles]
    scale = {s: min(Fraction(s[0] * tile, height), Fraction(s[1] * tile, width)) for s in shapes}
    up = [v for v in scale.values() if v >= 1]
    best = min(up) if up else max(scale.values())
    return min((s for s in shapes if scale[s] == best), key=lambda s: s[0] * s[1])


class TiledVisionTower(VisionTower):
    """Llama 3.2 Vision's tower (transformers' MllamaVisionModel): each image resized into a canvas of up to
    `max_tiles` tiles of image_size² pixels (tile_grid), padded with empty tiles to max_tiles; every tile's
    patches + a class token, padded to a multiple of `pad_to` tokens; a local encoder of n_layers and a global
    encoder of global_layers (gated residuals, tanh gates), both over all max_tiles · n_pad tokens of an image
    (padding masked, not skipped); learned positions gated, per-aspect-ratio tile embeddings before (pre-tile,
    T·d per ratio) and after the local encoder (post-tile), and a per-ratio, per-tile, per-position table
    (T·n_pos·d per ratio, +1 row each for the padding id 0). The projector reads the global encoder's output
    concatenated with `intermediate_layers` of the local one. Attention has no biases, the MLP has."""

    kind: Literal["tiled"] = "tiled"
    referenced: ClassVar[bool] = False
    max_tiles: PosInt
    aspect_ratios: PosInt
    """Tile arrangements the checkpoint has embeddings for (8 for max_tiles 4: 1×1 … 4×1)."""
    global_layers: PosInt
    intermediate_layers: list[int]
    pad_to: PosInt = 8
    attention_bias: bool = False
    in_prompt: ClassVar[bool] = False

    @model_validator(mode="after")
    def _tiled(self) -> "TiledVisionTower":
        if any(not 0 <= i < self.n_layers for i in self.intermediate_layers):
            raise ValueError(f"vision.intermediate_layers: give layer indices in 0..{self.n_layers - 1}")
        if self.projector.kind != "linear" or self.projector.concat != 1 + len(self.intermediate_layers):
            raise ValueError("vision.projector: a tiled tower's projector is linear over 1 + len(intermediate_layers) "
                             f"concatenated outputs; give kind linear, concat {1 + len(self.intermediate_layers)}")
        return self

    def tiles(self, height: int, width: int) -> tuple[int, int]:
        """(rows, columns) of real tiles of an image of height × width (tile_grid)."""
        return tile_grid(height, width, self.image_size, self.max_tiles)

    def grid(self, height: int, width: int) -> tuple[int, int]:
        """One tile's patch grid, whatever the image (each tile is image_size² pixels)."""
        side = self.image_size // self.patch_size
        return side, side

    @property
    def tile_tokens(self) -> int:
        """Tokens of one tile: patches + the class token."""
        return (self.image_size // self.patch_size) ** 2 + 1

    def tokens(self, height: int, width: int) -> int:
        """Image tokens the language model's cross-attention reads per image: max_tiles · (patches + 1), padding
        tiles included (the processor pads every image to max_tiles; their rows are masked, not dropped)."""
        return self.max_tiles * self.tile_tokens

    def sequence(self, height: int, width: int) -> int:
        """Tokens each encoder layer runs on per image: max_tiles · (patches + 1 rounded up to pad_to)."""
        return self.max_tiles * ceil_div(self.tile_tokens, self.pad_to) * self.pad_to

    def pairs(self, height: int, width: int) -> dict[str, int]:
        n = self.sequence(height, width)
        return {"full": n * n}

    @property
    def window_layers(self) -> int:
        return 0

    def layer_params(self) -> Parts:
        """One local layer: q, k, v, o (d², + d with attention_bias), the MLP (with biases), two LayerNorms."""
        d = self.d_model
        parts = {f"attention/{k}": linear(d, d, self.attention_bias) for k in ("q", "k", "v", "o")}
        parts |= {f"mlp/{k}": v for k, v in mlp_params(d, self.d_ff, gated=self.gated, bias=self.bias).items()}
        return parts | {"norms/layer": 2 * norm_params(self.norm, d)}

    def params(self, d_text: int) -> Parts:
        """patch embedding C·p²·d; class d; gated positions n_pos·d + 1 and the tile-position table
        (A + 1)·T·n_pos·d; pre- and post-tile embeddings (A + 1)·T·d + 1 each; local layers L·layer; global
        layers G·(layer + 2 gates); pre and post LayerNorms; the projector."""
        d, a, t, n_pos = self.d_model, self.aspect_ratios + 1, self.max_tiles, self.tile_tokens
        parts = {"vision/patch_embedding": self.patch_inputs * d, "vision/class_embedding": d,
                 "vision/position_embedding": n_pos * d + 1 + a * t * n_pos * d,
                 "vision/tile_embedding": 2 * (a * t * d + 1)}
        layer = self.layer_params()
        parts |= {f"vision/layers/{k}": self.n_layers * v for k, v in layer.items()}
        parts |= {f"vision/global_layers/{k}": self.global_layers * v for k, v in layer.items()}
        parts["vision/global_layers/gates"] = 2 * self.global_layers
        parts["vision/norms/outer"] = 2 * norm_params(self.norm, d)
        return parts | {f"projector/{k}": v for k, v in self.projector.params(d, d_text).items()}

    def flops(self, height: int, width: int, d_text: int) -> Parts:
        """Matmul FLOPs of one image (every one of its max_tiles tiles, padding ones included): patch embedding
        2·T·N_p·C·p²·d; per layer (local and global alike) over n = T·n_pad tokens 2·n·d² for each of q, k, v, o,
        2·n·d·f per MLP matrix, 2·n²·d for QKᵀ and again for AV (every pair: padding is masked, not skipped); the
        projector 2 · T·(N_p + 1) · c·d · D; and the padding mask, built as the outer product of the tokens'
        kept flags (n × 1 by 1 × n, 2·n², a matmul in transformers)."""
        gh, gw = self.grid(height, width)
        d, n, layers = self.d_model, self.sequence(height, width), self.n_layers + self.global_layers
        out = {"vision/patch_embedding": MAC * self.max_tiles * gh * gw * self.patch_inputs * d,
               "vision/attention_mask": MAC * n * n}
        for k in ("q", "k", "v", "o"):
            out[f"vision/layers/attention/{k}"] = layers * MAC * n * d * d
        out["vision/layers/attention/core_qk"] = out["vision/layers/attention/core_av"] = layers * MAC * n * n * d
        for k in mlp_params(d, self.d_ff, gated=self.gated, bias=False):
            out[f"vision/layers/mlp/{k}"] = layers * MAC * n * d * self.d_ff
        tokens = self.tokens(height, width)
        return out | {f"projector/{k}": MAC * tokens * w for k, w in self.projector.matmuls(d, d_text).items()}

    def explain_symbols(self) -> dict[str, int]:
        raise UserError("explain: Llama 3.2 Vision's tiled tower is not worked out yet; see `llmcalc params` and "
                        "`llmcalc flops`")

    def activation_bytes(self, height: int, width: int, d_text: int, act: int) -> int:
        """Bytes one image holds at the tower's peak (weights apart), in elements of `act` bytes, on a flash kernel:
        VisionTower's accounting over the tiled sequence n = max_tiles · n_pad: the pixel values of every tile,
        padding tiles included (T·g²·C·p²), the k = len(intermediate_layers) local layers' outputs the projector
        concatenates, kept from where each is taken to the end (k·n·d), and beside them the largest stage: an
        encoder layer n·max(7·d, 3·d + 2·f), or the projector (the c·d-wide concatenation of its input and its
        T·(N_p + 1)·D output). Not checked against a measured peak (the reference has no tiled tower)."""
        g, _ = self.grid(height, width)
        n, d, f = self.sequence(height, width), self.d_model, self.d_ff
        kept = len(self.intermediate_layers) * n * d
        layer = n * max(7 * d, 3 * d + (3 if self.gated else 2) * f)
        head = self.projector.activation_elements(n, d, d_text, self.tokens(height, width))
        return act * (self.max_tiles * g * g * self.patch_inputs + kept + max(layer, head))

    @property
    def label(self) -> str:
        return (f"tiled ViT {self.n_layers}+{self.global_layers}×{self.d_model}, patch {self.patch_size}, "
                f"up to {self.max_tiles} tiles of {self.image_size} px, {self.projector.label}")


class PixelShuffleProjector(BlockMergingProjector):
    """Llama 4 (transformers' Llama4VisionPixelShuffleMLP and Llama4MultiModalProjector): the encoder's patch tokens
    of one tile (class token dropped) pixel-shuffled, each m × m block into one token of m²·d features; fc1 (m²·d →
    `inner`), GELU, fc2 (inner → inner), GELU, then the projector's linear (inner → D); no biases."""

    kind: Literal["pixel_shuffle"] = "pixel_shuffle"
    merge: PosInt = 2
    """m = 1 / pixel_shuffle_ratio: the side of the block of patches one token gathers."""
    inner: PosInt
    """The adapter's width (projector_input_dim = projector_output_dim = vision_output_dim)."""
    label: ClassVar[str] = "pixel shuffle + MLP + linear"

    def params(self, d_vision: int, d_text: int) -> Parts:
        """fc1 m²·d·k, fc2 k·k, linear k·D."""
        return self.matmuls(d_vision, d_text)

    def matmuls(self, d_vision: int, d_text: int) -> Parts:
        return {"fc1": self.merge**2 * d_vision * self.inner, "fc2": self.inner * self.inner,
                "linear": self.inner * d_text}

    def explain_params(self) -> dict[str, str]:
        return {"fc1": "m_img · m_img · d_img · k_img", "fc2": "k_img · k_img", "linear": "k_img · d"}

    def explain_symbols(self) -> dict[str, int]:
        return {"m_img": self.merge, "k_img": self.inner}

    def activation_elements(self, encoder: int, d_vision: int, d_text: int, tokens: int) -> int:
        """The encoder's output n·d, its shuffled copy T·m²·d and fc1's output T·k held together (not checked
        against a measured peak)."""
        return encoder * d_vision + tokens * (self.merge**2 * d_vision + self.inner)


class PerTileTower(VisionTower):
    """A tower that encodes each image as tiles of image_size² pixels, one encoder pass per tile (`tiles`: the
    canvas's columns and rows; `tile_count`: the tiles encoded, a whole-image tile besides when the canvas has
    more than one): tokens, FLOPs and the activation peak are one tile's times the tiles."""

    referenced: ClassVar[bool] = False
    explain_legend: ClassVar[dict[str, str]] = VisionTower.explain_legend | {
        "t_img": "tiles the tower encodes per image (the canvas's tiles, + 1 whole-image tile when more than one)"}

    def tiles(self, height: int, width: int) -> tuple[int, int]:
        """The canvas of tiles an image of height × width is cut into, (rows, columns) or (columns, rows)."""
        raise NotImplementedError

    def tile_count(self, height: int, width: int) -> int:
        """Tiles the encoder runs on per image: the canvas's tiles, plus one for the whole image when more than 1."""
        r, c = self.tiles(height, width)
        return r * c + (r * c > 1)

    def tokens(self, height: int, width: int) -> int:
        """Image tokens per image: tiles · one tile's."""
        return self.tile_count(height, width) * super().tokens(height, width)

    def flops(self, height: int, width: int, d_text: int) -> Parts:
        """VisionTower's FLOPs of one tile (n = g² + 1 tokens, every pair), times the tiles."""
        n = self.tile_count(height, width)
        return {k: n * v for k, v in super().flops(height, width, d_text).items()}

    def activation_bytes(self, height: int, width: int, d_text: int, act: int) -> int:
        """VisionTower's peak of one tile, times the tiles (encoded as one batch). Not checked against a measured
        peak (the reference has no tiled tower)."""
        return self.tile_count(height, width) * super().activation_bytes(height, width, d_text, act)

    def explain_image_symbols(self, height: int, width: int, d_text: int) -> dict[str, int]:
        """VisionTower's per-image symbols of one tile (N_p, n_img, P_img; m_proj over one tile's tokens), T_img the
        image's tokens over all its tiles, and t_img its tiles."""
        out = super().explain_image_symbols(height, width, d_text)
        per_tile = VisionTower.tokens(self, height, width)
        return out | {"t_img": self.tile_count(height, width),
                      "m_proj": self.projector.activation_elements(out["n_img"], self.d_model, d_text, per_tile)}

    def explain_flops(self) -> dict[str, str]:
        """The encoder's terms of one tile times t_img; the projector's over T_img, the tokens of every tile."""
        return {k: v if k.startswith("projector/") else f"t_img · {v}" for k, v in super().explain_flops().items()}

    def explain_activations(self) -> str:
        return f"t_img · ({super().explain_activations()})"


class Llama4VisionTower(PerTileTower):
    """Llama 4's tower (transformers' Llama4VisionModel): the processor resizes each image into a canvas of up to
    `max_tiles` tiles of image_size² pixels (tile_grid, the same choice as Llama 3.2 Vision's) and, when that is
    more than one tile, adds the whole image resized to one tile (the global tile); the encoder runs on each tile
    alone: its patches (an unfolded linear embedding, no bias) + a class token, a learned position table, a
    LayerNorm before and after the layers, LayerNorm blocks with biased q, k, v, o and a GELU MLP, 2-D rotary
    positions (no weights). Each tile's patch tokens then go through the pixel-shuffle projector."""

    kind: Literal["llama4"] = "llama4"
    max_tiles: PosInt
    """The processor's max_patches: the most tiles of the canvas (16), the global tile apart."""

    @model_validator(mode="after")
    def _llama4(self) -> "Llama4VisionTower":
        if self.projector.kind != "pixel_shuffle" or not self.class_token:
            raise ValueError("vision.projector: Llama 4's tower has a class token and the pixel-shuffle projector; "
                             "give class_token true and projector kind pixel_shuffle")
        return self

    def tiles(self, height: int, width: int) -> tuple[int, int]:
        """(rows, columns) of the canvas an image of height × width is cut into (tile_grid)."""
        return tile_grid(height, width, self.image_size, self.max_tiles)

    @property
    def label(self) -> str:
        return (f"ViT {self.n_layers}×{self.d_model}, patch {self.patch_size}, up to {self.max_tiles} tiles of "
                f"{self.image_size} px + a global tile, {self.projector.label}")


def closest_canvas(height: int, width: int, tile: int, min_tiles: int, max_tiles: int) -> tuple[int, int]:
    """(columns, rows) of the canvas InternVL's processor (transformers' GotOcr2 image processor, crop_to_patches)
    cuts an image into: of the arrangements of c × r tiles with min_tiles ≤ c·r ≤ max_tiles, taken in order of c·r
    (then c, then r), the one whose c / r is closest to width / height; on a tie a later one replaces the best so
    far while the image's area exceeds half the canvas's (tile² · c·r). Float arithmetic, as the processor's."""
    shapes = sorted(((c, r) for c in range(1, max_tiles + 1) for r in range(1, max_tiles + 1)
                     if min_tiles <= c * r <= max_tiles), key=lambda s: s[0] * s[1])
    aspect, area = width / height, width * height
    best, best_diff = (1, 1), float("inf")
    for c, r in shapes:
        diff = abs(aspect - c / r)
        if diff < best_diff:
            best, best_diff = (c, r), diff
        elif diff == best_diff and area > 0.5 * tile * tile * c * r:
            best = (c, r)
    return best


class InternVLVisionTower(PerTileTower):
    """InternVL's tower (transformers' InternVLVisionModel, InternViT): the processor cuts each image into a canvas of
    min_tiles … max_tiles tiles of image_size² pixels (closest_canvas) and, when more than one, adds a thumbnail of the
    whole image; per tile a Conv2d patch embedding with a bias, a class token (and a mask token, `mask_token`), a
    learned table of patches + 1 positions (`learned_positions`), blocks of two norms, q, k, v (biases with
    `attention_bias`) and o (a bias), per-head-less RMSNorms over all of q and of k (`qk_norm`, d each), a GELU MLP
    with biases and two layer-scale vectors (d each, scaling the attention's and the MLP's outputs); a LayerNorm after
    the blocks unless mean pooling (`post_norm`); then the class token is dropped and the `internvl` projector
    pixel-shuffles and projects each tile's patches."""

    kind: Literal["internvl"] = "internvl"
    max_tiles: PosInt = 12
    min_tiles: PosInt = 1
    attention_bias: bool = False
    qk_norm: bool = False
    mask_token: bool = False

    @model_validator(mode="after")
    def _internvl(self) -> "InternVLVisionTower":
        if self.projector.kind != "internvl" or not self.class_token or self.min_tiles > self.max_tiles:
            raise ValueError("vision.projector: InternVL's tower has a class token and the internvl projector, and "
                             "min_tiles ≤ max_tiles; give class_token true, projector kind internvl")
        return self

    def tiles(self, height: int, width: int) -> tuple[int, int]:
        """(columns, rows) of the canvas (closest_canvas)."""
        return closest_canvas(height, width, self.image_size, self.min_tiles, self.max_tiles)

    def layer_params(self) -> Parts:
        """q, k, v (d², + d with attention_bias), o (d² + d), the MLP with biases, two norms, the q and k RMSNorms
        (qk_norm: d each) and the two layer-scale vectors (2·d)."""
        d = self.d_model
        parts = {f"attention/{k}": linear(d, d, self.attention_bias) for k in ("q", "k", "v")}
        parts["attention/o"] = linear(d, d, True)
        parts |= {f"mlp/{k}": v for k, v in mlp_params(d, self.d_ff, gated=self.gated, bias=self.bias).items()}
        parts["norms/layer"] = 2 * norm_params(self.norm, d) + (2 * d if self.qk_norm else 0)
        return parts | {"layer_scale": 2 * d}

    def params(self, d_text: int) -> Parts:
        """VisionTower's, the norm after the blocks a LayerNorm whatever the blocks' norm (2·d), and the mask
        token (d)."""
        out = super().params(d_text)
        if self.post_norm:
            out["vision/norms/outer"] = 2 * self.d_model
        return out | ({"vision/mask_token": self.d_model} if self.mask_token else {})

    def explain_params(self) -> dict[str, str]:
        """VisionTower's, with InternViT's biases, q/k norms, layer scale and mask token."""
        out = super().explain_params()
        qkv = "L_img · (d_img · d_img + d_img)" if self.attention_bias else "L_img · (d_img · d_img)"
        out |= {f"vision/layers/attention/{k}": qkv for k in ("q", "k", "v")}
        out["vision/layers/attention/o"] = "L_img · (d_img · d_img + d_img)"
        if self.qk_norm:
            out["vision/layers/norms/layer"] += " + L_img · 2 · d_img"
        out["vision/layers/layer_scale"] = "L_img · 2 · d_img"
        if self.post_norm:
            out["vision/norms/outer"] = "2 · d_img"
        return out | ({"vision/mask_token": "d_img"} if self.mask_token else {})

    @property
    def label(self) -> str:
        return (f"InternViT {self.n_layers}×{self.d_model}, patch {self.patch_size}, {self.min_tiles}–{self.max_tiles} "
                f"tiles of {self.image_size} px + a thumbnail, {self.projector.label}")


class InternVLProjector(BlockMergingProjector):
    """InternVL (transformers' InternVLMultiModalProjector): each tile's patch tokens (class token dropped)
    pixel-shuffled, every m × m block into one token of m²·d features; LayerNorm over m²·d, Linear(m²·d → D) with a
    bias, the activation, Linear(D → D) with a bias."""

    kind: Literal["internvl"] = "internvl"
    merge: PosInt = 2
    """m = 1 / downsample_ratio."""
    activation: Activation = "gelu"
    label: ClassVar[str] = "pixel shuffle + LayerNorm + 2-layer MLP"

    def params(self, d_vision: int, d_text: int) -> Parts:
        """LayerNorm 2·m²·d, linear_1 m²·d·D + D, linear_2 D·D + D."""
        width = self.merge**2 * d_vision
        return {"norm": 2 * width, "linear_1": linear(width, d_text, True), "linear_2": linear(d_text, d_text, True)}

    def matmuls(self, d_vision: int, d_text: int) -> Parts:
        return {"linear_1": self.merge**2 * d_vision * d_text, "linear_2": d_text * d_text}

    def explain_params(self) -> dict[str, str]:
        return {"norm": "2 · m_img · m_img · d_img", "linear_1": "m_img · m_img · d_img · d + d",
                "linear_2": "d · d + d"}

    def explain_symbols(self) -> dict[str, int]:
        return {"m_img": self.merge}

    def activation_elements(self, encoder: int, d_vision: int, d_text: int, tokens: int) -> int:
        """The encoder's output n·d, its shuffled and normed copies 2·T·m²·d and linear_1's output T·D held together
        (not checked against a measured peak)."""
        return encoder * d_vision + tokens * (2 * self.merge**2 * d_vision + d_text)


def _tower(value: object) -> object:
    """A vision dict's class by its `kind` (vit: VisionTower, the default; tiled: TiledVisionTower; llama4:
    Llama4VisionTower; internvl: InternVLVisionTower)."""
    if isinstance(value, dict):
        kinds = {"vit": VisionTower, "tiled": TiledVisionTower, "llama4": Llama4VisionTower,
                 "internvl": InternVLVisionTower}
        kind = value.get("kind", "vit")
        if not isinstance(kind, str) or kind not in kinds:
            raise ValueError(f"vision.kind: {kind!r} is not one of {', '.join(kinds)}")
        return kinds[kind].model_validate(value)
    return value


VisionTowerSpec = Annotated[SerializeAsAny[VisionTower], BeforeValidator(_tower)]
"""A vision tower of any kind, picked by its `kind` (default vit), dumped with its own kind's fields."""
