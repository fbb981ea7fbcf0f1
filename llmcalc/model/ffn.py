"""Feed-forward: the `FFN` base every variant derives from, and the dense and gated families with their
closed-form counts and `llmcalc explain` terms; MoE is in llmcalc/model/moe.py.

Dense: up d→f, down f→d. Gated (SwiGLU, GeGLU): gate and up d→f, down f→d. MoE: E routed experts
(each a Dense or Gated FFN of d_ff), a router d→E, optional shared experts always applied, and
optionally some layers that keep a plain gated FFN. See docs/formulas.md#ffn.
"""

from collections.abc import Callable
from typing import Any, ClassVar, Literal

from llmcalc.model import terms
from llmcalc.model.attention import linear
from llmcalc.model.base import Parts, PosInt, Variant
from llmcalc.model.lora import Adaptable
from llmcalc.model.units import ceil_div

Activation = Literal["gelu", "gelu_tanh", "relu", "relu2", "silu", "swish", "quick_gelu", "swiglu_oai"]
DenseActivation = Activation | Literal["xielu"]
"""A dense (not gated) MLP's activation: any Activation, or Apertus' xIELU, which holds XIELU_PARAMS learned scalars
(the only activation with weights, so only the dense MLP that Apertus uses takes it)."""
ACTIVATION_FLOPS: dict[str, int] = {"relu": 1, "relu2": 2, "silu": 4, "swish": 4, "gelu": 5, "gelu_tanh": 9,
                                    "quick_gelu": 5, "swiglu_oai": 9, "xielu": 12}
"""Element-wise FLOPs of one activation per element, an exp, erf or tanh counted as 1 like an add: relu max(x, 0)
1; relu2 (Nemotron-H's squared ReLU, relu(x)²) 2; silu x/(1 + e^−x) 4 (exp, add, divide, multiply); gelu
½x(1 + erf(x/√2)) 5; gelu_tanh ½x(1 + tanh(√(2/π)(x + 0.044715x³))) 9; quick_gelu x·σ(1.702x) 5; swiglu_oai (gpt-oss:
the gate clamped, x·σ(1.702x), up clamped both ways, + 1) 9; xielu (Apertus; Huang et al. 2024, arXiv:2411.13010)
where(x > 0, α_p·x·x + β·x, α_n·(expm1(min(x, ε)) − x) + β·x) 12 (compare and select 2, the positive branch 4, the
negative 6). A gated FFN adds 1 for the gate × up product."""
XIELU_PARAMS = 2
"""xIELU's learned scalars per MLP: α_p and α_n (transformers' XIELUActivation; β and ε are fixed buffers)."""


def weights(parts: Parts) -> int:
    return sum(parts.values())


def mlp_params(d_model: int, d_ff: int, *, gated: bool, bias: bool) -> Parts:
    """One MLP: {gate, up, down}; gate only when gated. Biases add d_ff (gate, up) or d (down)."""
    parts = {"up": linear(d_model, d_ff, bias), "down": linear(d_ff, d_model, bias)}
    return {"gate": linear(d_model, d_ff, bias)} | parts if gated else parts


def mlp_matrices(d_model: int, d_ff: int, *, gated: bool) -> list[tuple[int, int]]:
    """One MLP's weight matrices (d_in, d_out): gate and up d → f (up only when not gated), down f → d."""
    return [(d_model, d_ff)] * (2 if gated else 1) + [(d_ff, d_model)]


def mlp_adaptable(component: str, d_model: int, d_ff: int, *, gated: bool, stored: int = 1,
                  used: int = 1) -> list[Adaptable]:
    """One MLP's matrices as LoRA adapts them: gate (gated only) and up d → f, down f → d."""
    names = ("gate", "up") if gated else ("up",)
    return [Adaptable(component if component else n, (n,), d_model, d_ff, stored, used) for n in names] + [
        Adaptable(component if component else "down", ("down",), d_ff, d_model, stored, used)]


def mlp_lora_saved(d_ff: int, targets: frozenset[str], *, gated: bool) -> int:
    """Elements per token one MLP keeps for the backward pass under LoRA, its input aside (saved_elements less
    down's input, the activation's output or the gated product, unless down is adapted)."""
    return (2 if gated else 1) * d_ff + (d_ff if "down" in targets else 0)


def mlp_io(d_model: int, d_ff: int, *, gated: bool) -> Parts:
    """Elements each MLP matmul reads and writes per token: d + f each."""
    return dict.fromkeys(("gate", "up", "down") if gated else ("up", "down"), d_model + d_ff)


def mlp_formula(f: str, gated: bool, bias: bool) -> str:
    """Explain text: one MLP of width f, 3·d·f (gated) or 2·d·f, plus 2·f + d or f + d of biases."""
    n = 3 if gated else 2
    return f"{n} · d · {f}" + (f" + {n - 1} · {f} + d" if bias else "")


def mlp_parts_formula(names: tuple[str, ...], bias: bool) -> dict[str, tuple[str, str]]:
    """Explain text of one MLP of width f: per matmul (parameters, weights one token is multiplied by);
    `names` the d → f ones (gate, up), then down f → d."""
    shapes = {n: ("d", "f") for n in names} | {"down": ("f", "d")}
    return {n: (terms.linear(i, o, bias), f"{i} · {o}") for n, (i, o) in shapes.items()}


class FFN(Variant):
    """A layer's feed-forward block. Subclassing registers a new `kind` (llmcalc/model/base.py).

    A variant gives d_ff, label, kind_label, params, matmuls, matrices, io, transient_elements,
    prefill_activation_bytes, saved_elements, activation_flops, elementwise_elements, elementwise_kernels, and the
    explain terms explain_parts and explain_saved; the defaults here are an FFN without routed experts whose one
    width is d_ff."""

    kinds: ClassVar[dict[str, type[Variant]]] = {}
    variant_modules: ClassVar[dict[str, str]] = {
        "none": "llmcalc.model.ffn", "dense": "llmcalc.model.ffn", "gated": "llmcalc.model.ffn",
        "moe": "llmcalc.model.moe"}
    """Each kind's module, imported when a spec names the kind (Variant)."""

    @property
    def routed_experts(self) -> int:
        """Routed experts E (0: none)."""
        return 0

    @property
    def router_width(self) -> int:
        """Outputs of the router (0: none)."""
        return 0

    @property
    def leading_dense_layers(self) -> int:
        """How many of the model's first layers use dense_ffn() instead (0)."""
        return 0

    def inactive_parts(self, d_model: int) -> Parts:
        """Parameters of one layer one token does not use, by component (none)."""
        return {}

    def tp_width(self, ep: int) -> int | None:
        """The width tensor parallelism splits, d_ff, when experts are spread over `ep` GPUs (None: nothing)."""
        return self.d_ff

    def tp_shards(self, component: str, tp: int, ep: int) -> int:
        """Ranks the parameters of `component` (a params() key) are split over in training, under tensor
        parallelism `tp` and expert parallelism `ep`: tp (column- then row-parallel matrices)."""
        return tp

    def tp_saved_elements(self, tp: int) -> int:
        """Of saved_elements, the elements per token one of `tp` tensor-parallel ranks keeps: all of them,
        split over tp."""
        return ceil_div(self.saved_elements(), tp)

    def check_spec(self, spec: Any) -> None:
        """Raise ValueError (naming the field and the fix) when this FFN does not fit the rest of `spec` (a
        ModelSpec); any FFN fits."""

    def cut_to(self, layers: int) -> "FFN":
        """This FFN in a model cut to its first `layers` layers (itself)."""
        return self

    def scaled_fields(self, div: Callable[[int], int]) -> dict[str, Any]:
        """Fields of a narrower copy: d_ff divided by `div` (a function)."""
        return self.model_dump() | {"d_ff": div(self.d_ff)}

    def explain_symbols(self) -> dict[str, int]:
        """f: the FFN width."""
        return {"f": self.d_ff}

    def explain_inactive(self) -> str | None:
        """inactive_parts of one layer, summed, as text (None: every parameter is used)."""
        return None

    def adaptable(self, d_model: int) -> list[Adaptable]:
        """The matrices a LoRA adapter can go on (llmcalc/model/lora.py): none unless the variant says."""
        return []

    def lora_saved_elements(self, d_model: int, targets: frozenset[str]) -> int:
        """Elements per token kept for the backward pass under LoRA, input included: as in full training unless
        the variant says (`saved_elements`, the input d)."""
        return d_model + self.saved_elements()


class NoFFN(FFN):
    """A layer without a feed-forward block (Mamba-2's layers: norm, mixer, residual): nothing to count."""

    kind: Literal["none"] = "none"

    @property
    def d_ff(self) -> int:
        """No width: 0."""
        return 0

    @property
    def label(self) -> str:
        return "no FFN"

    @property
    def kind_label(self) -> str:
        return "none"

    def params(self, d_model: int) -> Parts:
        return {}

    def matmuls(self, d_model: int) -> Parts:
        return {}

    def matrices(self, d_model: int) -> dict[str, list[tuple[int, int]]]:
        return {}

    def io(self, d_model: int) -> Parts:
        return {}

    def transient_elements(self) -> int:
        return 0

    def prefill_activation_bytes(self, d_model: int, act: int) -> int:
        return 0

    def activation_flops(self, d_model: int) -> int:
        return 0

    def elementwise_elements(self, d_model: int, eager: bool = False) -> int:
        return 0

    def elementwise_kernels(self, eager: bool = False) -> int:
        return 0

    def eager_saved_elements(self) -> int:
        return 0

    def saved_elements(self) -> int:
        return 0

    def tp_width(self, ep: int) -> int | None:
        return None

    def lora_saved_elements(self, d_model: int, targets: frozenset[str]) -> int:
        return 0

    def scaled_fields(self, div: Callable[[int], int]) -> dict[str, Any]:
        return self.model_dump()

    def explain_symbols(self) -> dict[str, int]:
        return {}

    def explain_parts(self) -> dict[str, tuple[str, str]]:
        return {}

    def explain_saved(self) -> str:
        return "0"


class Dense(FFN):
    """Two-matrix MLP: down(act(up(x))). 2·d·f weights (+f+d biases)."""

    kind: Literal["dense"] = "dense"
    d_ff: PosInt
    activation: DenseActivation = "gelu"
    """xielu adds its XIELU_PARAMS learned scalars to each MLP (component `activation`)."""
    bias: bool = False

    @property
    def label(self) -> str:
        return f"MLP {self.activation} {self.d_ff}"

    @property
    def activation_params(self) -> int:
        """Learned scalars of the activation: XIELU_PARAMS for xielu, else 0."""
        return XIELU_PARAMS if self.activation == "xielu" else 0

    @property
    def kind_label(self) -> str:
        """The family in a few characters."""
        return "MLP"

    def params(self, d_model: int) -> Parts:
        parts = mlp_params(d_model, self.d_ff, gated=False, bias=self.bias)
        return parts | {"activation": self.activation_params} if self.activation_params else parts

    def tp_shards(self, component: str, tp: int, ep: int) -> int:
        """up and down are split over tp; the activation's scalars are replicated on every rank."""
        return 1 if component == "activation" else tp

    def matmuls(self, d_model: int) -> Parts:
        """Weights each token is multiplied by: up and down."""
        return mlp_params(d_model, self.d_ff, gated=False, bias=False)

    def matrices(self, d_model: int) -> dict[str, list[tuple[int, int]]]:
        """Weight matrices (d_in, d_out) of each component (biases stay in 16 bits when quantized)."""
        return {"up": [(d_model, self.d_ff)], "down": [(self.d_ff, d_model)]}

    def io(self, d_model: int) -> Parts:
        return mlp_io(d_model, self.d_ff, gated=False)

    def activation_flops(self, d_model: int) -> int:
        """Element-wise FLOPs per token: the activation on d_ff elements (ACTIVATION_FLOPS)."""
        return ACTIVATION_FLOPS[self.activation] * self.d_ff

    def elementwise_elements(self, d_model: int, eager: bool = False) -> int:
        """Elements per token the activation's kernel reads and writes: d_ff in, d_ff out, fused or eager (one
        native kernel either way; an activation eager PyTorch composes of several ops, xIELU, moves more)."""
        return 2 * self.d_ff

    def elementwise_kernels(self, eager: bool = False) -> int:
        """The activation's kernel: 1."""
        return 1

    def eager_saved_elements(self) -> int:
        """Elements per token an eager activation keeps beyond a fused one: none (one native kernel keeps its
        input either way)."""
        return 0

    def transient_elements(self) -> int:
        """Widest intermediate per token: the d_ff activation."""
        return self.d_ff

    def prefill_activation_bytes(self, d_model: int, act: int) -> int:
        """Bytes per token held at this FFN's peak in a prefill, beyond its input (docs/formulas.md#inference-peak):
        up's output and its activation (2·f), then the activation and down's output (f + d)."""
        return act * max(2 * self.d_ff, self.d_ff + d_model)

    def saved_elements(self) -> int:
        """Kept for the backward pass per token: up output and activation output, 2·d_ff."""
        return 2 * self.d_ff

    def adaptable(self, d_model: int) -> list[Adaptable]:
        """up and down (llmcalc/model/lora.py); gate names nothing here."""
        return mlp_adaptable("", d_model, self.d_ff, gated=False)

    def lora_saved_elements(self, d_model: int, targets: frozenset[str]) -> int:
        """Under LoRA, per token: the input (d) when up is adapted, up's output (f), the activation's (f)
        when down is adapted; the adapters' r-wide intermediates aside."""
        return (d_model if "up" in targets else 0) + mlp_lora_saved(self.d_ff, targets, gated=False)

    def explain_parts(self) -> dict[str, tuple[str, str | None]]:
        """Per layer: (parameters, weights one token is multiplied by) of up and down, and of xIELU's scalars
        (multiplied by none)."""
        parts: dict[str, tuple[str, str | None]] = dict(mlp_parts_formula(("up",), self.bias))
        return parts | {"activation": (str(self.activation_params), None)} if self.activation_params else parts

    def explain_saved(self) -> str:
        """saved_elements as text."""
        return "2 · f"


class Gated(FFN):
    """Gated MLP (SwiGLU with silu, GeGLU with gelu): down(act(gate(x)) * up(x)). 3·d·f weights."""

    kind: Literal["gated"] = "gated"
    d_ff: PosInt
    activation: Activation = "silu"
    bias: bool = False

    @property
    def label(self) -> str:
        name = {"silu": "SwiGLU", "swish": "SwiGLU", "gelu": "GeGLU", "gelu_tanh": "GeGLU"}.get(self.activation)
        return f"{name or 'gated ' + self.activation} {self.d_ff}"

    @property
    def kind_label(self) -> str:
        """The family in a few characters: SwiGLU, GeGLU, gated."""
        return {"silu": "SwiGLU", "swish": "SwiGLU", "gelu": "GeGLU", "gelu_tanh": "GeGLU"}.get(self.activation, "gated")

    def params(self, d_model: int) -> Parts:
        return mlp_params(d_model, self.d_ff, gated=True, bias=self.bias)

    def matmuls(self, d_model: int) -> Parts:
        """Weights each token is multiplied by: gate, up and down."""
        return mlp_params(d_model, self.d_ff, gated=True, bias=False)

    def matrices(self, d_model: int) -> dict[str, list[tuple[int, int]]]:
        """Weight matrices (d_in, d_out) of each component (biases stay in 16 bits when quantized)."""
        return {"gate": [(d_model, self.d_ff)], "up": [(d_model, self.d_ff)], "down": [(self.d_ff, d_model)]}

    def io(self, d_model: int) -> Parts:
        return mlp_io(d_model, self.d_ff, gated=True)

    def activation_flops(self, d_model: int) -> int:
        """Element-wise FLOPs per token: the activation on the gate's d_ff elements and the gate × up product,
        (ACTIVATION_FLOPS + 1)·d_ff."""
        return (ACTIVATION_FLOPS[self.activation] + 1) * self.d_ff

    def elementwise_elements(self, d_model: int, eager: bool = False) -> int:
        """Elements per token the activation-and-product kernel reads and writes: gate and up in, d_ff out
        (3·d_ff); eager, two kernels: the activation (gate in, d_ff out) and the product (both in, d_ff out),
        5·d_ff."""
        return (5 if eager else 3) * self.d_ff

    def elementwise_kernels(self, eager: bool = False) -> int:
        """One fused activation-and-product kernel; eager two."""
        return 1 + int(eager)

    def eager_saved_elements(self) -> int:
        """Elements per token eager keeps beyond the fused kernel's gate and up: the activation's output, which the
        product keeps for up's gradient, d_ff."""
        return self.d_ff

    def transient_elements(self) -> int:
        """Widest intermediate per token: gate and up outputs, 2·d_ff."""
        return 2 * self.d_ff

    def prefill_activation_bytes(self, d_model: int, act: int) -> int:
        """Bytes per token held at this FFN's peak in a prefill, beyond its input (docs/formulas.md#inference-peak):
        two f-wide tensors at a time (gate's output and its activation, then the activation and up's output,
        multiplied in place), then the product and down's output (f + d)."""
        return act * max(2 * self.d_ff, self.d_ff + d_model)

    def saved_elements(self) -> int:
        """Kept for the backward pass per token: gate, up and their product, 3·d_ff."""
        return 3 * self.d_ff

    def adaptable(self, d_model: int) -> list[Adaptable]:
        """gate, up and down (llmcalc/model/lora.py)."""
        return mlp_adaptable("", d_model, self.d_ff, gated=True)

    def lora_saved_elements(self, d_model: int, targets: frozenset[str]) -> int:
        """Under LoRA, per token: the input (d) when gate or up is adapted, gate's and up's outputs (2·f), their
        product (f) when down is adapted; the adapters' r-wide intermediates aside."""
        return (d_model if {"gate", "up"} & targets else 0) + mlp_lora_saved(self.d_ff, targets, gated=True)

    def explain_parts(self) -> dict[str, tuple[str, str]]:
        """Per layer: (parameters, weights one token is multiplied by) of gate, up and down."""
        return mlp_parts_formula(("gate", "up"), self.bias)

    def explain_saved(self) -> str:
        """saved_elements as text."""
        return "3 · f"
