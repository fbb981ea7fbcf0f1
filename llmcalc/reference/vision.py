"""The reference vision tower: a ViT encoder and its projector built from a spec's `VisionTower`, in plain torch.

Shapes: g_h × g_w the patch grid, N = g_h·g_w patches, n the encoder's tokens (N, +1 class token), P = C·t·p²
the pixel values of one patch, d the width, H heads, h = d / H the head dim, f the MLP width, D the language
model's width, m the merger's side, T the image tokens. One image at a time (batch 1). Attention is written as
two matmuls so that FlopCounterMode counts it on any device (its CPU SDPA kernel goes uncounted).
"""

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from llmcalc.model.vision import VisionTower
from llmcalc.reference.layers import ACTIVATIONS


def _norm(kind: str, d: int) -> nn.Module:
    return nn.LayerNorm(d) if kind == "layernorm" else nn.RMSNorm(d)


class Block(nn.Module):
    """Pre-norm encoder layer: x + attn(norm1(x)), then x + mlp(norm2(x)); attention within `windows` (a list of
    index tensors, None: the whole image)."""

    def __init__(self, t: VisionTower) -> None:
        super().__init__()
        d, f = t.d_model, t.d_ff
        self.heads, self.act, self.gated = t.heads, ACTIVATIONS[t.activation], t.gated
        self.norm1, self.norm2 = _norm(t.norm, d), _norm(t.norm, d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=t.bias) for _ in range(4))
        self.gate = nn.Linear(d, f, bias=t.bias) if t.gated else None
        self.up, self.down = nn.Linear(d, f, bias=t.bias), nn.Linear(f, d, bias=t.bias)

    def attend(self, x: Tensor) -> Tensor:
        n, d = x.shape  # (n, d)
        q, k, v = (p(x).view(n, self.heads, -1).transpose(0, 1) for p in (self.q, self.k, self.v))  # (H, n, h)
        scores = (q @ k.transpose(1, 2)) / q.shape[-1] ** 0.5  # (H, n, n)
        return (scores.softmax(-1) @ v).transpose(0, 1).reshape(n, d)  # (H, n, h) → (n, d)

    def forward(self, x: Tensor, windows: list[Tensor] | None) -> Tensor:
        h = self.norm1(x)  # (n, d)
        if windows is None:
            a = self.attend(h)
        else:
            a = torch.empty_like(h)
            for idx in windows:  # idx: (n_w,) the tokens of one window
                a[idx] = self.attend(h[idx])
        x = x + self.o(a)
        h = self.norm2(x)
        inner = self.act(self.gate(h)) * self.up(h) if self.gated else self.act(self.up(h))  # (n, f)
        return x + self.down(inner)


class Projector(nn.Module):
    """The spec's projector kind: mlp (Linear d→D, GELU, Linear D→D), pool (average-pool to √T × √T, RMSNorm,
    Linear d→D) or merger (RMSNorm, m × m patches concatenated, Linear m²d→m²d, GELU, Linear m²d→D)."""

    def __init__(self, t: VisionTower, d_text: int) -> None:
        super().__init__()
        p, d = t.projector, t.d_model
        self.kind = p.kind
        if p.kind == "mlp":
            self.act = ACTIVATIONS[p.activation]
            self.fc1, self.fc2 = nn.Linear(d, d_text), nn.Linear(d_text, d_text)
        elif p.kind == "pool":
            self.side, self.norm, self.fc1 = p.side, nn.RMSNorm(d), nn.Linear(d, d_text, bias=False)
        else:
            wide = p.merge**2 * d
            self.merge, self.norm = p.merge, nn.RMSNorm(d)
            self.fc1, self.fc2 = nn.Linear(wide, wide), nn.Linear(wide, d_text)

    def forward(self, x: Tensor, gh: int, gw: int) -> Tensor:
        d = x.shape[-1]  # x: (N, d), the patches row by row
        if self.kind == "mlp":
            return self.fc2(self.act(self.fc1(x)))  # (T = N, D)
        grid = x.view(gh, gw, d)
        if self.kind == "pool":
            pooled = F.adaptive_avg_pool2d(grid.permute(2, 0, 1), self.side)  # (d, √T, √T)
            return self.fc1(self.norm(pooled.flatten(1).T))  # (T, D)
        m = self.merge
        blocks = self.norm(grid).view(gh // m, m, gw // m, m, d).permute(0, 2, 1, 3, 4)  # (g_h/m, g_w/m, m, m, d)
        return self.fc2(F.gelu(self.fc1(blocks.reshape(-1, m * m * d))))  # (T, m²d) → (T, D)


class VisionEncoder(nn.Module):
    """Patch embedding (a Linear over each patch's P values: the convolution's arithmetic), class token, learned
    positions, the layers (window or full attention), the outer norms and the projector."""

    def __init__(self, t: VisionTower, d_text: int) -> None:
        super().__init__()
        self.t, d = t, t.d_model
        self.patch = nn.Linear(t.patch_inputs, d, bias=t.patch_bias)
        self.cls = nn.Parameter(torch.zeros(d)) if t.class_token else None
        native = (t.image_size // t.patch_size) ** 2 + t.class_token
        self.pos = nn.Parameter(torch.zeros(native, d)) if t.learned_positions else None
        self.pre = _norm(t.norm, d) if t.pre_norm else None
        self.post = _norm(t.norm, d) if t.post_norm else None
        self.layers = nn.ModuleList(Block(t) for _ in range(t.n_layers))
        self.projector = Projector(t, d_text)

    def windows(self, gh: int, gw: int, device: torch.device) -> list[Tensor]:
        """Token indices of each window × window tile of the grid, from the top-left (edge tiles smaller)."""
        s, ids = self.t.window, torch.arange(gh * gw, device=device).view(gh, gw)
        return [ids[r:r + s, c:c + s].reshape(-1) for r in range(0, gh, s) for c in range(0, gw, s)]

    def forward(self, patches: Tensor, gh: int, gw: int) -> Tensor:
        x = self.patch(patches)  # (N, P) → (N, d)
        if self.cls is not None:
            x = torch.cat([self.cls[None], x])  # (n, d)
        if self.pos is not None and self.pos.shape[0] == x.shape[0]:
            x = x + self.pos  # the native grid; another size would interpolate the table (element-wise)
        if self.pre is not None:
            x = self.pre(x)
        tiles = self.windows(gh, gw, x.device) if self.t.window else None
        full = set(self.t.full_layers)
        for i, layer in enumerate(self.layers):
            x = layer(x, None if tiles is None or i in full else tiles)
        if self.post is not None:
            x = self.post(x)
        return self.projector(x[int(self.t.class_token):], gh, gw)  # the class token dropped: (T, D)


def measure_image(tower: VisionTower, d_text: int, height: int, width: int,
                  device: str = "meta") -> tuple[int, int, int]:
    """(parameters, FLOPs under FlopCounterMode, image tokens) of one image through the reference tower built on
    `device` (meta: shapes only, any size)."""
    from torch.utils.flop_counter import FlopCounterMode

    gh, gw = tower.grid(height, width)
    with torch.device(device):
        model = VisionEncoder(tower, d_text)
        patches = torch.randn(gh * gw, tower.patch_inputs)  # (N, P)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        out = model(patches, gh, gw)
    return sum(p.numel() for p in model.parameters()), counter.get_total_flops(), out.shape[0]
