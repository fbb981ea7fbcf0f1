"""LoRA: which weight matrices of a layer an adapter of rank r goes on, named by the seven targets PEFT users
write (q, k, v, o, gate, up, down), and what one adapter holds. See docs/formulas.md#lora.

An adapter on a matrix W of d_in inputs and d_out outputs is two trained matrices, A: d_in → r and
B: r → d_out, added to the frozen W's output (y = x·W + (x·A)·B · α/r): r·(d_in + d_out) parameters, and
2·r·(d_in + d_out) FLOPs per token it passes through.

Each variant lists its `Adaptable` matrices (Attention.adaptable, FFN.adaptable) with the targets that adapt
them:

  GQA / MHA / MQA   q → q, k → k, v → v, o → o (Reformer has no k matrix: its keys are the queries)
  MLA (and DSA)     q → q_down and q_up (or q, without a query latent); k or v → kv_down and kv_up (one
                    latent projection serves both: naming either adapts it, once); o → o. DSA's indexer is
                    never adapted (it trains on its own loss, its input detached).
  dense MLP         up → up (fc1), down → down (fc2); gate names nothing
  gated MLP         gate → gate, up → up, down → down
  MoE               gate, up, down → that matrix of every routed expert (one adapter per expert matrix, as
                    PEFT puts one on each expert's nn.Linear) and of every shared expert; the router and the
                    shared-expert gate are not targets (they stay frozen)

The default targets are all seven: every linear of the layers, as QLoRA trains (Dettmers et al. 2023, §4:
"LoRA on all linear transformer block layers"), the MoE router aside. The embedding and the LM head are
never adapted.
"""

from typing import NamedTuple

TARGETS = ("q", "k", "v", "o", "gate", "up", "down")
"""The LoRA target names, in the order they are listed."""
QLORA_FORMATS = "nf4-dq,embedding=bf16,head=bf16"
"""QLoRA's base (Dettmers et al. 2023): every linear of the layers in NF4 with double quantisation
(llmcalc/model/formats.py counts its bytes), the embedding and LM head in bf16 (bitsandbytes leaves both
unquantised), norms and what is not a matrix in bf16; it computes in bf16."""


class Adaptable(NamedTuple):
    """One kind of weight matrix of a layer that a LoRA adapter can go on."""

    component: str
    """Its component within the block (attention: q, kv_down; FFN: gate, experts, shared_experts)."""
    targets: tuple[str, ...]
    """The LoRA targets any of which adapts it."""
    d_in: int
    d_out: int
    stored: int = 1
    """Matrices of this shape per layer (routed experts: one per expert)."""
    used: int = 1
    """How many of them one token passes through (routed experts: top_k)."""

    def adapted(self, targets: frozenset[str]) -> bool:
        return not targets.isdisjoint(self.targets)

    def params(self, rank: int) -> int:
        """Adapter parameters of every stored matrix: stored · r · (d_in + d_out)."""
        return self.stored * rank * (self.d_in + self.d_out)

    def weights_per_token(self, rank: int) -> int:
        """Adapter weights one token is multiplied by: used · r · (d_in + d_out)."""
        return self.used * rank * (self.d_in + self.d_out)


def parse_targets(text: str) -> tuple[str, ...]:
    """`q,v` or `all` → the targets in TARGETS order; unknown names are left for the workload to refuse."""
    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    if names == ["all"]:
        return TARGETS
    return tuple(sorted(set(names), key=lambda t: TARGETS.index(t) if t in TARGETS else len(TARGETS)))
