"""The reference vision tower: a ViT encoder and its projector built from a spec's `VisionTower`, in plain torch.

Shapes: g_h × g_w the patch grid, N = g_h·g_w patches, n the encoder's tokens (N, +1 class token), P = C·t·p²
the pixel values of one patch, d the width, H heads, h = d / H the head dim, f the MLP width, D the language
model's width, m the merger's side, T the image tokens, k the images encoded together. Attention is written as
two matmuls so that FlopCounterMode counts it on any device (its CPU SDPA kernel goes uncounted), or, with
flash=True, as one SDPA call (no n × n scores) for the peak-memory measurement; each layer is written as two
residual expressions so that no transient outlives its use.
"""

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from llmcalc.errors import UserError
from llmcalc.model.vision import VisionTower
from llmcalc.reference.layers import ACTIVATIONS


def _norm(kind: str, d: int) -> nn.Module:
    return nn.LayerNorm(d) if kind == "layernorm" else nn.RMSNorm(d)


class Block(nn.Module):
    """Pre-norm encoder layer: x + attn(norm1(x)), then x + mlp(norm2(x)); attention within `windows` (a list of
    index tensors, None: the whole image)."""

    def __init__(self, t: VisionTower, flash: bool = False) -> None:
        super().__init__()
        d, f = t.d_model, t.d_ff
        self.heads, self.act, self.gated, self.flash = t.heads, ACTIVATIONS[t.activation], t.gated, flash
        self.norm1, self.norm2 = _norm(t.norm, d), _norm(t.norm, d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=t.bias) for _ in range(4))
        self.gate = nn.Linear(d, f, bias=t.bias) if t.gated else None
        self.up, self.down = nn.Linear(d, f, bias=t.bias), nn.Linear(f, d, bias=t.bias)

    def attend(self, x: Tensor) -> Tensor:
        k_img, n, d = x.shape  # (k, n, d)
        q, k, v = (p(x).view(k_img, n, self.heads, -1).transpose(1, 2) for p in (self.q, self.k, self.v))  # (k,H,n,h)
        if self.flash:
            out = F.scaled_dot_product_attention(q, k, v)  # (k, H, n, h), no scores kept
        else:
            scores = (q @ k.transpose(2, 3)) / q.shape[-1] ** 0.5  # (k, H, n, n)
            out = scores.softmax(-1) @ v  # (k, H, n, h)
        return out.transpose(1, 2).reshape(k_img, n, d)  # (k, H, n, h) → (k, n, d)

    def attention(self, h: Tensor, windows: list[Tensor] | None) -> Tensor:
        if windows is None:
            return self.attend(h)
        a = torch.empty_like(h)
        for idx in windows:  # idx: (n_w,) the tokens of one window
            a[:, idx] = self.attend(h[:, idx])
        return a

    def mlp(self, h: Tensor) -> Tensor:
        inner = self.act(self.gate(h)) * self.up(h) if self.gated else self.act(self.up(h))  # (k, n, f)
        return self.down(inner)

    def forward(self, x: Tensor, windows: list[Tensor] | None) -> Tensor:
        x = x + self.o(self.attention(self.norm1(x), windows))  # (k, n, d)
        return x + self.mlp(self.norm2(x))


class Projector(nn.Module):
    """The spec's projector kind: mlp (Linear d→D, GELU, Linear D→D), pool (average-pool to √T × √T, RMSNorm,
    Linear d→D), merger (its norm over d, m × m patches concatenated, Linear m²d→m²d, GELU, Linear m²d→D) or
    downsample (m × m patches through Linear m²d→D, Linear D→D, LayerNorm, GELU, a gated MLP D→C→D)."""

    def __init__(self, t: VisionTower, d_text: int) -> None:
        super().__init__()
        p, d = t.projector, t.d_model
        self.kind = p.kind
        if p.kind == "mlp":
            self.act = ACTIVATIONS[p.activation]
            self.fc1, self.fc2 = nn.Linear(d, d_text), nn.Linear(d_text, d_text)
        elif p.kind == "pool":
            self.side, self.norm, self.fc1 = p.side, nn.RMSNorm(d), nn.Linear(d, d_text, bias=False)
        elif p.kind == "downsample":
            self.merge, self.act = p.merge, ACTIVATIONS[p.activation]
            self.down_conv = nn.Linear(p.merge**2 * d, d_text)  # the m × m Conv2d's arithmetic
            self.proj, self.norm = nn.Linear(d_text, d_text, bias=False), nn.LayerNorm(d_text)
            self.gate, self.up = (nn.Linear(d_text, p.context, bias=False) for _ in range(2))
            self.down = nn.Linear(p.context, d_text, bias=False)
        else:
            wide = p.merge**2 * d
            self.merge, self.norm = p.merge, _norm(p.norm, d)
            self.fc1, self.fc2 = nn.Linear(wide, wide), nn.Linear(wide, d_text)

    def forward(self, x: Tensor, gh: int, gw: int) -> Tensor:
        k, _, d = x.shape  # x: (k, N, d), the patches row by row
        if self.kind == "mlp":
            return self.fc2(self.act(self.fc1(x)))  # (k, T = N, D)
        grid = x.view(k, gh, gw, d)
        if self.kind == "pool":
            pooled = F.adaptive_avg_pool2d(grid.permute(0, 3, 1, 2), self.side)  # (k, d, √T, √T)
            return self.fc1(self.norm(pooled.flatten(2).transpose(1, 2)))  # (k, T, D)
        m = self.merge
        if self.kind == "downsample":
            blocks = grid.view(k, gh // m, m, gw // m, m, d).permute(0, 1, 3, 2, 4, 5)  # (k, g_h/m, g_w/m, m, m, d)
            h = F.gelu(self.norm(self.proj(self.down_conv(blocks.reshape(k, -1, m * m * d)))))  # (k, T, D)
            return self.down(self.act(self.gate(h)) * self.up(h))  # (k, T, C) → (k, T, D)
        blocks = self.norm(grid).view(k, gh // m, m, gw // m, m, d).permute(0, 1, 3, 2, 4, 5)  # (k,g_h/m,g_w/m,m,m,d)
        return self.fc2(F.gelu(self.fc1(blocks.reshape(k, -1, m * m * d))))  # (k, T, m²d) → (k, T, D)


class DeepStackMerger(nn.Module):
    """Qwen3-VL's DeepStack merger: m × m patches concatenated, then its norm over m²d, Linear m²d→m²d, GELU,
    Linear m²d→D; run on one encoder layer's output."""

    def __init__(self, t: VisionTower, d_text: int) -> None:
        super().__init__()
        self.merge, wide = t.projector.merge, t.projector.merge**2 * t.d_model
        self.norm, self.fc1, self.fc2 = _norm(t.projector.norm, wide), nn.Linear(wide, wide), nn.Linear(wide, d_text)

    def forward(self, x: Tensor, gh: int, gw: int) -> Tensor:
        k, _, d = x.shape  # (k, N, d)
        m = self.merge
        blocks = x.view(k, gh // m, m, gw // m, m, d).permute(0, 1, 3, 2, 4, 5)  # (k, g_h/m, g_w/m, m, m, d)
        return self.fc2(F.gelu(self.fc1(self.norm(blocks.reshape(k, -1, m * m * d)))))  # (k, T, m²d) → (k, T, D)


class VisionEncoder(nn.Module):
    """Patch embedding (a Linear over each patch's P values: the convolution's arithmetic), class token, learned
    positions, the layers (window or full attention; DeepStack mergers after some), the outer norms and the
    projector."""

    def __init__(self, t: VisionTower, d_text: int, flash: bool = False) -> None:
        super().__init__()
        if t.kind != "vit":
            raise UserError(f"vision.kind: the reference tower builds ViTs only, not a {t.kind} tower (Llama 3.2 "
                            "Vision's is checked against transformers in tests/test_vision.py)")
        self.t, d = t, t.d_model
        self.patch = nn.Linear(t.patch_inputs, d, bias=t.patch_bias)
        self.cls = nn.Parameter(torch.zeros(d)) if t.class_token else None
        self.pos = nn.Parameter(torch.zeros(t.positions, d)) if t.learned_positions else None
        self.pre = _norm(t.norm, d) if t.pre_norm else None
        self.post = _norm(t.norm, d) if t.post_norm else None
        self.layers = nn.ModuleList(Block(t, flash) for _ in range(t.n_layers))
        self.projector = Projector(t, d_text)
        self.deepstack_layers = list(getattr(t.projector, "deepstack_layers", ()))
        self.deepstack = nn.ModuleList(DeepStackMerger(t, d_text) for _ in self.deepstack_layers)

    def windows(self, gh: int, gw: int, device: torch.device) -> list[Tensor]:
        """Token indices of each window × window tile of the grid, from the top-left (edge tiles smaller)."""
        s, ids = self.t.window, torch.arange(gh * gw, device=device).view(gh, gw)
        return [ids[r:r + s, c:c + s].reshape(-1) for r in range(0, gh, s) for c in range(0, gw, s)]

    def forward(self, patches: Tensor, gh: int, gw: int) -> Tensor:
        x = self.patch(patches)  # (k, N, P) → (k, N, d)
        if self.cls is not None:
            x = torch.cat([self.cls.expand(x.shape[0], 1, -1), x], 1)  # (k, n, d)
        if self.pos is not None and self.pos.shape[0] == x.shape[1]:
            x = x + self.pos  # the native grid; another size would interpolate the table (element-wise)
        if self.pre is not None:
            x = self.pre(x)
        tiles = self.windows(gh, gw, x.device) if self.t.window else None
        full = set(self.t.full_layers)
        deep = []  # DeepStack's image tokens, (k, T, D) each, kept for the language model
        for i, layer in enumerate(self.layers):
            x = layer(x, None if tiles is None or i in full else tiles)
            if i in self.deepstack_layers:
                deep.append(self.deepstack[self.deepstack_layers.index(i)](x, gh, gw))
        if self.post is not None:
            x = self.post(x)
        out = self.projector(x[:, int(self.t.class_token):], gh, gw)  # the class token dropped: (k, T, D)
        self.deepstack_out = deep
        return out


def measure_image(tower: VisionTower, d_text: int, height: int, width: int,
                  device: str = "meta") -> tuple[int, int, int]:
    """(parameters, FLOPs under FlopCounterMode, image tokens) of one image through the reference tower built on
    `device` (meta: shapes only, any size)."""
    from torch.utils.flop_counter import FlopCounterMode

    gh, gw = tower.grid(height, width)
    with torch.device(device):
        model = VisionEncoder(tower, d_text)
        patches = torch.randn(1, gh * gw, tower.patch_inputs)  # (1, N, P)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        out = model(patches, gh, gw)
    return sum(p.numel() for p in model.parameters()), counter.get_total_flops(), out.shape[1]


def image_peak(tower: VisionTower, d_text: int, height: int, width: int, images: int = 1,
               dtype: torch.dtype = torch.bfloat16, device: str = "fake") -> int:
    """Peak bytes of live tensors (weights apart) while the reference tower, on a flash kernel (SDPA), encodes
    `images` images of height × width pixels as one batch: on fake tensors (full size, no memory) or real CPU
    ones, counted by llmcalc.reference.measure.LiveBytes from the pixel values on."""
    import contextlib

    from torch._subclasses.fake_tensor import FakeTensorMode

    from llmcalc.reference.measure import LiveBytes

    gh, gw = tower.grid(height, width)
    default = torch.get_default_dtype()
    with FakeTensorMode() if device == "fake" else contextlib.nullcontext(), LiveBytes() as mem:
        torch.set_default_dtype(dtype)  # weights in `dtype`, seen by LiveBytes: views of them add nothing
        try:
            model = VisionEncoder(tower, d_text, flash=True).eval()
        finally:
            torch.set_default_dtype(default)
        weights = mem.now
        mem.reset_peak()
        with torch.no_grad():
            patches = torch.randn(images, gh * gw, tower.patch_inputs, dtype=dtype)  # (k, N, P)
            model(patches, gh, gw)
    return mem.peak - weights
