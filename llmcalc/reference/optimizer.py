"""The reference's optimizer: AdamW in mixed precision, as the training steps of the reference run it
(llmcalc/reference/measure.py train_run) and as the reference engine counts its kernels
(llmcalc/reference/kernel_count.py count_training)."""

from __future__ import annotations

import torch

OPTIMIZER_CHUNK = 1 << 26
"""Elements of a parameter the reference's AdamW updates at a time: its transient fp32 gradient stays within 256 MB."""


class MasterAdamW:
    """AdamW in mixed precision as Megatron runs it: the model's bf16 weights and gradients, an fp32 master copy of
    each weight and fp32 first and second moments (16 bytes a parameter with the bf16 gradient). A step walks the
    parameters in chunks of OPTIMIZER_CHUNK elements: the chunk's gradient in fp32, the moments and the master
    updated, the bf16 weight rewritten from the master; then the gradients are dropped."""

    def __init__(self, params, lr: float = 1e-4, betas=(0.9, 0.95), eps: float = 1e-8, weight_decay: float = 0.1):
        self.params = [p for p in params if p.requires_grad]
        self.master = [p.detach().float() for p in self.params]
        self.m = [torch.zeros_like(m) for m in self.master]
        self.v = [torch.zeros_like(m) for m in self.master]
        self.lr, self.betas, self.eps, self.wd, self.t = lr, betas, eps, weight_decay, 0

    @torch.no_grad()
    def step(self) -> None:
        self.t += 1
        b1, b2 = self.betas
        c1, c2 = 1 - b1**self.t, 1 - b2**self.t
        for p, w, m, v in zip(self.params, self.master, self.m, self.v, strict=True):
            if p.grad is None:
                continue
            flat = [t.view(-1) for t in (p, p.grad, w, m, v)]
            for i in range(0, flat[0].numel(), OPTIMIZER_CHUNK):
                pc, gc, wc, mc, vc = (t[i:i + OPTIMIZER_CHUNK] for t in flat)
                g = gc.float()
                mc.mul_(b1).add_(g, alpha=1 - b1)
                vc.mul_(b2).addcmul_(g, g, value=1 - b2)
                wc.mul_(1 - self.lr * self.wd).addcdiv_(mc / c1, (vc / c2).sqrt_().add_(self.eps), value=-self.lr)
                pc.copy_(wc)
            p.grad = None
