"""Mixture of experts: E routed experts (each a Dense or Gated FFN of d_ff), a router d→E, the top k experts per
token, optional shared experts always applied, and optionally some leading layers that keep a plain FFN. Imported
when a spec names kind `moe` (FFN.variant_modules), not with every spec. See docs/formulas.md#ffn and docs/moe.md.
"""

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from llmcalc.model import terms
from llmcalc.model.attention import linear
from llmcalc.model.base import NonNegInt, Parts, PosInt
from llmcalc.model.ffn import (
    ACTIVATION_FLOPS,
    FFN,
    Activation,
    Dense,
    Gated,
    mlp_adaptable,
    mlp_formula,
    mlp_io,
    mlp_lora_saved,
    mlp_matrices,
    mlp_params,
    weights,
)
from llmcalc.model.lora import Adaptable
from llmcalc.model.units import ceil_div

MAX_EXPERTS = 65_536
"""Most routed experts a layer may have: 170 × DeepSeek-V3's 256 and 128 × the largest published count (512); the
costs list each expert's weight matrices, so a count past any model's is refused rather than built."""


class MoE(FFN):
    """Mixture of experts: top_k of `experts` routed experts per token, plus shared experts.

    Routed experts: E·P_e where P_e is one expert MLP of d_ff. Router: d·E (+E bias).
    Shared experts: shared_experts·P(shared_d_ff), applied to every token; shared_gate adds a
    d→1 sigmoid gate (Qwen-MoE). Zero experts (LongCat-Flash) widen the router to d·(E + Z) and take
    router_top_k − top_k of a token's router_top_k slots, at no matmul. `dense_layers` of the model's
    layers (DeepSeek: the first k) use a gated MLP of dense_d_ff instead (as do a hybrid_pattern's `dense`
    slots, Jamba's). Active per token: top_k·P_e + shared + router.
    """

    kind: Literal["moe"] = "moe"
    experts: Annotated[int, Field(gt=0, le=MAX_EXPERTS, strict=True)]
    """Routed experts, at most MAX_EXPERTS (the costs list each expert's matrices)."""
    top_k: PosInt
    d_ff: PosInt
    zero_experts: Annotated[int, Field(ge=0, le=MAX_EXPERTS, strict=True)] = 0
    """Zero-computation experts in the router's pool beside the `experts` (LongCat-Flash's zero_expert_num): a
    token routed to one passes through unchanged, scaled by its gate, and no FFN runs (docs/longcat.md)."""
    router_top_k: PosInt | None = None
    """Slots the router fills per token from the experts + zero_experts pool (LongCat-Flash's moe_topk). None:
    top_k. With zero experts, `top_k` is the expected number of a token's slots that go to real experts, the
    routing's share a spec states (every count per token uses it); the other slots cost no matmul."""
    gated: bool = True
    activation: Activation = "silu"
    expert_bias: bool = False
    router_bias: bool = False
    shared_experts: Annotated[int, Field(ge=0, le=MAX_EXPERTS, strict=True)] = 0
    """Experts every token runs, at most MAX_EXPERTS (the costs list each one's matrices)."""
    shared_d_ff: NonNegInt = 0
    shared_gate: bool = False
    dense_layers: NonNegInt = 0
    dense_d_ff: NonNegInt = 0
    capacity_factor: Annotated[float, Field(gt=0, strict=True)] | None = None
    """Expert capacity C = ceil(capacity_factor · T · top_k / experts) for T routed tokens (Switch,
    GShard); assignments beyond C are dropped. None: dropless (every assignment is computed)."""

    @model_validator(mode="after")
    def _consistent(self) -> "MoE":
        if self.top_k > self.experts:
            raise ValueError(
                f"ffn.top_k: top_k ({self.top_k}) exceeds experts ({self.experts}); "
                "set top_k to at most experts"
            )
        slots = self.routed_slots
        if slots < self.top_k or slots - self.top_k > self.zero_experts:
            raise ValueError(
                f"ffn.router_top_k: {slots} slots per token for top_k {self.top_k} real experts and "
                f"{self.zero_experts} zero experts; give router_top_k from top_k to top_k + zero_experts "
                "(or leave it out without zero experts)"
            )
        if bool(self.shared_experts) != bool(self.shared_d_ff):
            raise ValueError(
                "ffn.shared_d_ff: shared_experts and shared_d_ff go together; "
                "set both (> 0) or both to 0"
            )
        if self.shared_gate and not self.shared_experts:
            raise ValueError("ffn.shared_gate: needs shared experts; set shared_experts or shared_gate: false")
        if self.dense_layers and not self.dense_d_ff:  # dense_d_ff alone: a hybrid_pattern's `dense` slots (Jamba)
            raise ValueError(
                "ffn.dense_d_ff: dense_layers and dense_d_ff go together; set both (> 0) or both to 0"
            )
        return self

    def check_spec(self, spec: Any) -> None:
        """The dense layers are some of the model's."""
        if self.dense_layers > spec.n_layers:
            raise ValueError(
                f"ffn.dense_layers: {self.dense_layers} exceeds n_layers ({spec.n_layers}); lower it"
            )

    @property
    def routed_experts(self) -> int:
        return self.experts

    @property
    def router_width(self) -> int:
        """Outputs of the router: the real experts and the zero experts, E + Z."""
        return self.experts + self.zero_experts

    @property
    def routed_slots(self) -> int:
        """Slots the router fills per token (router_top_k, else top_k); top_k of them run an expert."""
        return self.router_top_k or self.top_k

    @property
    def leading_dense_layers(self) -> int:
        return self.dense_layers

    def tp_width(self, ep: int) -> int | None:
        """d_ff while the experts are tensor-split (ep 1); whole experts over ep GPUs split nothing."""
        return self.d_ff if ep == 1 else None

    @property
    def label(self) -> str:
        shared = f" + {self.shared_experts} shared" if self.shared_experts else ""
        if self.zero_experts:
            return (f"MoE {self.experts}×{self.d_ff} + {self.zero_experts} zero, {self.top_k} of top-"
                    f"{self.routed_slots} real{shared}")
        return f"MoE {self.experts}×{self.d_ff} top-{self.top_k}{shared}"

    @property
    def kind_label(self) -> str:
        """The family in a few characters: MoE 8/2 (experts / top-k), +1 for a shared expert."""
        return f"MoE {self.experts}/{self.top_k}" + (f"+{self.shared_experts}" if self.shared_experts else "")

    def params(self, d_model: int) -> Parts:
        one = mlp_params(d_model, self.d_ff, gated=self.gated, bias=self.expert_bias)
        parts = {"router": linear(d_model, self.router_width, self.router_bias)}
        parts["experts"] = self.experts * sum(one.values())
        if self.shared_experts:
            shared = mlp_params(d_model, self.shared_d_ff, gated=self.gated, bias=self.expert_bias)
            parts["shared_experts"] = self.shared_experts * sum(shared.values())
        if self.shared_gate:
            parts["shared_gate"] = d_model
        return parts

    def activation_flops(self, d_model: int) -> int:
        """Element-wise FLOPs per token: the router's softmax over the E (+ Z zero) experts (3·(E + Z): exp, sum,
        divide), the activation (and the gate × up product) in each of its top_k experts and the shared experts,
        and the outputs of its slots weighted and summed (2·d per slot: a zero expert's is the token itself).
        The shared gate's sigmoid is not counted."""
        per = ACTIVATION_FLOPS[self.activation] + self.gated
        return (3 * self.router_width + per * (self.top_k * self.d_ff + self.shared_experts * self.shared_d_ff)
                + 2 * self.routed_slots * d_model)

    def elementwise_elements(self, d_model: int, eager: bool = False) -> int:
        """Elements per token the layer's element-wise kernels read and write: the activation (and gate × up) in
        each of its top_k experts and the shared experts ((2 + gated)·d_ff each; eager, the activation and the
        product as two kernels, (2 + 3·gated)·d_ff), and the routing's copies: the token permuted into its slots
        (d read, slots·d written) and the slots' outputs weighted and summed back (slots·d read, d written),
        2·(slots + 1)·d. The router's softmax over E is not counted."""
        per = 2 + (3 if eager else 1) * self.gated
        return (per * (self.top_k * self.d_ff + self.shared_experts * self.shared_d_ff)
                + 2 * (self.routed_slots + 1) * d_model)

    def eager_saved_elements(self) -> int:
        """Elements per token eager keeps beyond fused kernels: gated, each of the top_k and shared experts' gate
        activation output, which the product keeps (as Gated)."""
        return self.gated * (self.top_k * self.d_ff + self.shared_experts * self.shared_d_ff)

    def elementwise_kernels(self, eager: bool = False) -> int:
        """The experts' activation (eager and gated: and the product, a second kernel) and the routing's two
        copies, the permutation and its inverse."""
        return 1 + int(eager and self.gated) + 2

    def matmuls(self, d_model: int) -> Parts:
        """Weights one token is multiplied by: router d·(E + Z), its top_k experts, the shared experts."""
        one = weights(mlp_params(d_model, self.d_ff, gated=self.gated, bias=False))
        parts = {"router": d_model * self.router_width, "experts": self.top_k * one}
        if self.shared_experts:
            shared = mlp_params(d_model, self.shared_d_ff, gated=self.gated, bias=False)
            parts["shared_experts"] = self.shared_experts * weights(shared)
        if self.shared_gate:
            parts["shared_gate"] = d_model
        return parts

    def matrices(self, d_model: int) -> dict[str, list[tuple[int, int]]]:
        """Weight matrices (d_in, d_out) of each component: the router, every routed expert's MLP, the
        shared experts' and the shared gate (biases stay in 16 bits when quantized)."""
        out = {"router": [(d_model, self.router_width)],
               "experts": self.experts * mlp_matrices(d_model, self.d_ff, gated=self.gated)}
        if self.shared_experts:
            out["shared_experts"] = self.shared_experts * mlp_matrices(d_model, self.shared_d_ff, gated=self.gated)
        return out | ({"shared_gate": [(d_model, 1)]} if self.shared_gate else {})

    def io(self, d_model: int) -> Parts:
        """Elements read and written per token, keyed like matmuls(): each routed copy and shared expert."""
        parts = {"router": d_model + self.router_width,
                 "experts": self.top_k * weights(mlp_io(d_model, self.d_ff, gated=self.gated))}
        if self.shared_experts:
            parts["shared_experts"] = self.shared_experts * weights(mlp_io(d_model, self.shared_d_ff, gated=self.gated))
        if self.shared_gate:
            parts["shared_gate"] = d_model + 1
        return parts

    def expert_params(self, d_model: int) -> int:
        """One routed expert's parameters, P_e."""
        return weights(mlp_params(d_model, self.d_ff, gated=self.gated, bias=self.expert_bias))

    def transient_elements(self) -> int:
        """Widest intermediate per token: top_k routed (and shared) gate/up outputs."""
        per = 2 if self.gated else 1
        return per * (self.top_k * self.d_ff + self.shared_experts * self.shared_d_ff)

    def saved_elements(self) -> int:
        """Kept for the backward pass per token: each routed and shared expert's intermediates, the
        input copy each routed expert receives is not counted (a view), plus the router logits (E + Z)."""
        per = 3 if self.gated else 2
        return per * (self.top_k * self.d_ff + self.shared_experts * self.shared_d_ff) + self.router_width

    def adaptable(self, d_model: int) -> list[Adaptable]:
        """Every routed expert's gate (gated), up and down (E stored, top_k used per token) and every shared
        expert's; the router and the shared gate are not LoRA targets."""
        out = mlp_adaptable("experts", d_model, self.d_ff, gated=self.gated, stored=self.experts, used=self.top_k)
        if self.shared_experts:
            n = self.shared_experts
            out += mlp_adaptable("shared_experts", d_model, self.shared_d_ff, gated=self.gated, stored=n, used=n)
        return out

    def lora_saved_elements(self, d_model: int, targets: frozenset[str]) -> int:
        """Under LoRA, per token: as saved_elements (the routed copies of the input not counted, the router
        logits E kept), each expert's down input only when down is adapted, and the input (d) when an expert's
        first matrix (gate or up) is adapted; the adapters' r-wide intermediates aside."""
        per = mlp_lora_saved(1, targets, gated=self.gated)
        first = {"gate", "up"} if self.gated else {"up"}
        return ((d_model if first & targets else 0) + self.router_width
                + per * (self.top_k * self.d_ff + self.shared_experts * self.shared_d_ff))

    def tp_shards(self, component: str, tp: int, ep: int) -> int:
        """The router and the shared gate whole on every rank; routed experts whole over ep ranks (ep > 1),
        else tensor-split like the shared experts over tp."""
        if component in ("router", "shared_gate"):
            return 1
        return ep if component == "experts" and ep > 1 else tp

    def tp_saved_elements(self, tp: int) -> int:
        """The experts' intermediates split over tp (with ep > 1, balanced routing gives each rank its share
        of the copies); the router logits (E + Z) whole."""
        return ceil_div(self.saved_elements() - self.router_width, tp)

    def prefill_activation_bytes(self, d_model: int, act: int) -> int:
        """Bytes per token held at this layer's peak in a prefill, beyond its input (docs/formulas.md#inference-peak),
        with the routed experts run as grouped GEMMs over the k copies of each token permuted by expert:
        the router's logits (E) and top-k; then per copy the permuted token (d) and two f-wide tensors
        (a third with expert biases, gathered per row), or the activation and down's output (f + d, 2d with
        biases), beside the routing indices (int64) and weights; then the k outputs and their sum; then the
        shared experts (each f_s-wide as a gated MLP) beside the routed sum."""
        d, f, k, bias = d_model, self.d_ff, self.top_k, self.expert_bias
        routing = k * (8 + act + 3 * 8)  # top-k indices and weights; each copy's order, expert and token
        routed = act * k * max(d + 2 * f + (f if bias else 0), f + d + (d if bias else 0)) + routing
        slots = self.routed_slots  # the router's top slots, zero experts' among them
        stages = [act * (self.router_width + slots) + 8 * slots, routed, act * (k * d + d) + routing]
        if self.shared_experts:
            fs = self.shared_d_ff
            stages.append(act * (d + self.shared_experts * max(2 * fs, fs + d, d) + d))
        return max(stages)

    def inactive_parts(self, d_model: int) -> Parts:
        """Routed experts one token does not use: (E − k)·P_e."""
        return {"experts": (self.experts - self.top_k) * self.expert_params(d_model)}

    def dense_ffn(self) -> Dense | Gated:
        """The plain FFN of the dense layers: the experts' shape with dense_d_ff."""
        cls = Gated if self.gated else Dense
        return cls(d_ff=self.dense_d_ff, activation=self.activation, bias=self.expert_bias)

    def cut_to(self, layers: int) -> "MoE":
        """With at most layers − 1 dense layers (none in a one-layer model), so an MoE layer is left."""
        if self.dense_layers < layers:
            return self
        return self.model_copy(update={"dense_layers": layers - 1, "dense_d_ff": self.dense_d_ff if layers > 1 else 0})

    def scaled_fields(self, div: Callable[[int], int]) -> dict[str, Any]:
        """Fields of a narrower copy: every width (routed, shared, dense layers') divided by `div`."""
        return self.model_dump() | {k: div(getattr(self, k)) for k in ("d_ff", "shared_d_ff", "dense_d_ff")}

    # ---- explain terms ----------------------------------------------------------------------------

    def explain_symbols(self) -> dict[str, int]:
        """f (one routed expert's width), E, k, n_s, f_s; Z with zero experts."""
        return {"f": self.d_ff, "E": self.experts, "k": self.top_k, "n_s": self.shared_experts,
                "f_s": self.shared_d_ff} | ({"Z": self.zero_experts} if self.zero_experts else {})

    def explain_parts(self) -> dict[str, tuple[str, str]]:
        """Per layer: (parameters, weights one token is multiplied by) of the router, the routed experts (all
        E stored, k used), the shared experts and their gate."""
        one = mlp_formula("f", self.gated, self.expert_bias)
        pool = "(E + Z)" if self.zero_experts else "E"
        out = {"router": (terms.linear("d", pool, self.router_bias), f"d · {pool}"),
               "experts": (terms.prod("E", one), terms.prod("k", mlp_formula("f", self.gated, False)))}
        if self.shared_experts:
            out["shared_experts"] = (terms.prod("n_s", mlp_formula("f_s", self.gated, self.expert_bias)),
                                     terms.prod("n_s", mlp_formula("f_s", self.gated, False)))
        return out | ({"shared_gate": ("d", "d")} if self.shared_gate else {})

    def explain_saved(self) -> str:
        """saved_elements as text."""
        per, pool = 3 if self.gated else 2, "(E + Z)" if self.zero_experts else "E"
        return f"{per} · (k · f + n_s · f_s) + {pool}" if self.shared_experts else f"{per} · k · f + {pool}"

    def explain_inactive(self) -> str | None:
        """(E − k) routed experts per layer."""
        return terms.prod("E − k", mlp_formula("f", self.gated, self.expert_bias))
