"""LoRA adapters on the reference decoder (llmcalc/reference/model.py), in plain torch: what llmcalc's LoRA
formulas (docs/formulas.md#lora) are measured against.

Shapes: B batch, T tokens, d_in / d_out a matrix's input and output widths, r the rank, n stacked experts,
R routed rows. Each adapted matrix W gets A: d_in → r (random) and B: r → d_out (zero, so the adapted model
starts as the base), y = x·W + (x·A)·B · α/r; every base parameter is frozen. Which matrices are adapted is
llmcalc's mapping (Attention.adaptable, FFN.adaptable: llmcalc/model/lora.py), read off the spec, so the
reference and the estimate name the same matrices by construction and differ only in what torch does with them.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from llmcalc.reference.layers import Experts
from llmcalc.reference.model import Decoder


class LoRALinear(nn.Module):
    """A frozen nn.Linear `base` (d_in → d_out) plus a rank-r adapter: base(x) + B(A(x)) · α/r."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float = 16.0):
        super().__init__()
        d_in, d_out = base.in_features, base.out_features
        w = base.weight
        self.base = base.requires_grad_(False)
        self.A = nn.Linear(d_in, rank, bias=False, device=w.device, dtype=w.dtype)  # [d_in, r]
        self.B = nn.Linear(rank, d_out, bias=False, device=w.device, dtype=w.dtype)  # [r, d_out]
        nn.init.normal_(self.A.weight, std=0.02)
        nn.init.zeros_(self.B.weight)
        self.scale = alpha / rank

    def forward(self, x: Tensor) -> Tensor:
        # [B, T, d_in] @ [d_in, d_out] + ([B, T, d_in] @ [d_in, r] @ [r, d_out]) · α/r → [B, T, d_out]
        return torch.add(self.base(x), self.B(self.A(x)), alpha=self.scale)


class ExpertsLoRA(nn.Module):
    """Stacked adapters for the stacked expert matrices of `Experts`: A [n, d_in, r], B [n, r, d_out] per
    adapted matrix name, applied per routed row as the base is (one gathered bmm each)."""

    def __init__(self, experts: Experts, names: list[str], rank: int, alpha: float = 16.0):
        super().__init__()
        self.scale = alpha / rank
        for name in names:
            w = getattr(experts, name)  # [n, d_in, d_out]
            n, d_in, d_out = w.shape
            a = nn.Parameter(torch.empty(n, d_in, rank, device=w.device, dtype=w.dtype))
            nn.init.normal_(a, std=0.02)
            setattr(self, f"{name}_A", a)
            setattr(self, f"{name}_B", nn.Parameter(torch.zeros(n, rank, d_out, device=w.device, dtype=w.dtype)))

    def delta(self, x: Tensor, name: str, idx: Tensor | None) -> Tensor | None:
        """(x·A)·B · α/r for x [R, m, d_in] routed by idx [R] (None: row r is expert r); None: not adapted."""
        a = getattr(self, f"{name}_A", None)
        if a is None:
            return None
        b = getattr(self, f"{name}_B")
        if idx is not None:
            a, b = a[idx], b[idx]  # [R, d_in, r], [R, r, d_out]
        return torch.bmm(torch.bmm(x, a), b) * self.scale  # [R, m, d_in] @ [R, d_in, r] @ [R, r, d_out]


def add_lora(model: Decoder, rank: int, targets: frozenset[str], alpha: float = 16.0) -> Decoder:
    """Freeze every parameter of `model`, then put rank-`rank` adapters on the matrices `targets` adapt (the
    spec's adaptable() lists, component names = the modules' attribute names), and make the embedding's output
    require grad, as PEFT's enable_input_require_grads does (the convention the estimate counts)."""
    spec, d = model.spec, model.spec.d_model
    model.requires_grad_(False)
    attn_names = {a.component for a in spec.attention.adaptable(d) if a.adapted(targets)}
    for layer, group_ffn in zip(model.layers, _layer_ffns(spec), strict=True):
        for name in attn_names:
            setattr(layer.attn, name, LoRALinear(getattr(layer.attn, name), rank, alpha))
        adapted = [a for a in group_ffn.adaptable(d) if a.adapted(targets)]
        ffn = layer.ffn
        if hasattr(ffn, "experts"):  # MoE: the routed and shared experts, one adapter per expert matrix
            for stack_name in ("experts", "shared"):
                stack = getattr(ffn, stack_name)
                component = "experts" if stack_name == "experts" else "shared_experts"
                names = [a.targets[0] for a in adapted if a.component == component]
                if stack is not None and names:
                    stack.lora = ExpertsLoRA(stack, names, rank, alpha)
        else:
            for a in adapted:
                setattr(ffn, a.component, LoRALinear(getattr(ffn, a.component), rank, alpha))
    model.embed.register_forward_hook(lambda module, inputs, out: out.requires_grad_(True))
    return model


def _layer_ffns(spec):
    from llmcalc.reference.model import layer_shape

    return [layer_shape(spec, i)[1] for i in range(spec.n_layers)]
