"""Gemma 3n's language model (transformers 5.24's Gemma3nForCausalLM, models/gemma3n/modeling_gemma3n.py): a Gemma 3
decoder (GQA with per-head q/k norms, four sandwich norms a layer, sliding and full layers) wrapped in Gemma 3n's own
parts. See docs/gemma3n.md.

Letters: d model width, L layers, n AltUp streams (altup_num_inputs), r LAuReL rank (laurel_rank), p per-layer input
width (hidden_size_per_layer_input), V_p rows of the per-layer embedding table (vocab_size_per_layer_input).

- `Gemma3nAttention` (kind gemma3n): GQA whose K/V may come from an earlier layer. The last `kv_shared_layers` layers
  (num_kv_shared_layers) project no keys or values: each attends over the cache of the last earlier layer of its own
  kind (sliding or full), so it holds no k/v projections or k/v norms and caches nothing.
- `Gemma3nStack` (stack kind gemma3n): what every layer adds around its attention and MLP (AltUp's router, its
  prediction and correction coefficients and output scale; LAuReL's low-rank residual d → r → d; the per-layer input
  gate d → p and projection p → d; three more norms of d), and what the model adds outside the layers (the per-layer
  embedding table V_p × L·p, its projection d → L·p and norm over p, AltUp's n − 1 stream projections d → d before the
  first layer and n − 1 after the last).

Activation sparsity (activation_sparsity_pattern: a Gaussian top-k on the gate of the first layers' MLPs) zeroes
activations element-wise; the gate, up and down matmuls still run dense, so it changes no count and no matmul FLOP.
"""

from typing import Any, ClassVar, Literal

from llmcalc.errors import UserError
from llmcalc.model.attention import GQA
from llmcalc.model.base import NonNegInt, Parts, PosInt
from llmcalc.model.stack import Stack
from llmcalc.model.units import packed_bytes

SHARED_KV = "shared_kv"
"""The component path of the layers that read an earlier layer's K/V (their q and o, their core)."""


class Gemma3nAttention(GQA):
    """GQA (q, k, v, o without biases; per-head q and k norms, a v norm without weights) whose layer may read the K/V
    an earlier layer cached (`shared_kv`): then only q (with its norm) and o have weights, the layer caches nothing
    and its core attends over the earlier layer's cache as that layer does (the same window)."""

    kind: Literal["gemma3n"] = "gemma3n"
    reference_activations: ClassVar[str | None] = (
        "Gemma 3n's AltUp carries n copies of the residual stream through every layer (and the per-layer inputs, "
        "N·p per token), which the memory model's prefill peak does not count (it holds one stream)")
    shared_kv: bool = False
    """Whether this layer reads the K/V of the last earlier layer of its kind instead of projecting its own."""

    def reading_shared_kv(self) -> "Gemma3nAttention":
        """This attention in a layer that reads an earlier layer's K/V."""
        return self.model_copy(update={"shared_kv": True})

    @property
    def label(self) -> str:
        return super().label + (" (K/V of an earlier layer)" if self.shared_kv else "")

    def _shapes(self, d_model: int) -> dict[str, tuple[int, int]]:
        shapes = super()._shapes(d_model)
        return {k: s for k, s in shapes.items() if k in ("q", "o")} if self.shared_kv else shapes

    def params(self, d_model: int) -> Parts:
        """q, k, v, o as GQA's (no biases); a K/V-reading layer: q and o."""
        parts = super().params(d_model)
        return {"q": parts["q"], "o": parts["o"]} if self.shared_kv else parts

    def qk_norm_widths(self) -> tuple[int, int, int]:
        """A K/V-reading layer norms its queries only: no key width."""
        head, q, k = super().qk_norm_widths()
        return (head, q, 0) if self.shared_kv else (head, q, k)

    def explain_qk_norm(self) -> tuple[str, str, str]:
        return ("h", "H · h", "0") if self.shared_kv else super().explain_qk_norm()

    def explain_parts(self) -> dict[str, tuple[str, str | None]]:
        parts = super().explain_parts()
        return {k: parts[k] for k in ("q", "o")} if self.shared_kv else parts

    def explain_kv(self, layers: str, bits: int, sliding: bool) -> str:
        return "0" if self.shared_kv else super().explain_kv(layers, bits, sliding)

    def rope_elements(self) -> int:
        """A K/V-reading layer rotates its queries only."""
        return self.heads * (self.head_dim - self.head_dim % 2) if self.shared_kv else super().rope_elements()

    def kv_elements(self) -> int:
        """Cached elements per token: a K/V-reading layer caches none (it reads the earlier layer's)."""
        return 0 if self.shared_kv else super().kv_elements()

    def step_cache_bytes(self, counts: Any, batch: Any, bits: int) -> Any:
        """A decode step reads the keys and values it attends to, a K/V-reading layer from the earlier layer's
        cache: 2·H_kv·h elements per key either way."""
        return packed_bytes(counts["keys"] * 2 * self.kv_width, bits)

    def layer_type(self, window: int | None) -> str:
        return super().layer_type(window) + (" (reads an earlier layer's K/V)" if self.shared_kv else "")

    @property
    def kv_note(self) -> str | None:
        if self.shared_kv:
            return ("Gemma 3n: the last num_kv_shared_layers layers cache nothing; each attends over the cache of the "
                    "last earlier layer of its kind (sliding or full)")
        return None

    @property
    def pattern_note(self) -> str | None:
        return ("Gemma 3n: AltUp, LAuReL and the per-layer inputs add matmuls per token in every layer (altup/, "
                "laurel/, per_layer/) and outside them (per_layer/model_projection, altup/projections, "
                "altup/unembed); activation sparsity zeroes MLP activations after the gate matmul, so the matmul "
                "FLOPs are the dense ones; docs/gemma3n.md")


class Gemma3nStack(Stack):
    """A causal decoder (it generates with a KV cache, as the default stack) with Gemma 3n's parts beside the
    attention and the MLP. Per layer: AltUp's router d → n (applied twice: to predict and to correct), router norm
    (d), prediction coefficients n → n², correction coefficients n → n, output scale (d); LAuReL d → r → d and its
    norm (d); the per-layer input gate d → p, projection p → d and norm (d). Outside the layers: the per-layer
    embedding table V_p × L·p (a lookup), its projection d → L·p and norm (p), AltUp's n − 1 projections d → d of the
    embedding into the other streams and n − 1 projections d → d back before the final norm."""

    kind: Literal["gemma3n"] = "gemma3n"
    altup_inputs: PosInt
    """n: AltUp's parallel streams (altup_num_inputs); the layers update one, the others follow by prediction."""
    laurel_rank: PosInt
    """r: LAuReL's rank (laurel_rank)."""
    per_layer_width: PosInt
    """p: each layer's input from the per-layer embeddings (hidden_size_per_layer_input)."""
    per_layer_vocab: PosInt
    """V_p: rows of the per-layer embedding table (vocab_size_per_layer_input); a token past it reads row 0."""
    kv_shared_layers: NonNegInt = 0
    """The last layers that read an earlier layer's K/V (num_kv_shared_layers)."""
    ffn_widths: list[PosInt] | None = None
    """Each layer's MLP width where they differ (intermediate_size as a list: a MatFormer slice, widths mixed and
    matched per layer); None: ffn.d_ff in every layer."""

    explain_legend: ClassVar[dict[str, str]] = {"n": "AltUp streams", "r": "LAuReL rank",
                                                "p": "per-layer input width", "V_p": "per-layer embedding rows"}


    @property
    def kv_reading_layers(self) -> int:
        return self.kv_shared_layers

    @property
    def layer_ffn_widths(self) -> list[int] | None:
        return self.ffn_widths

    def check_explained(self) -> None:
        """`explain` writes one MLP width for all layers: refused where they differ."""
        if self.ffn_widths is not None and len(set(self.ffn_widths)) > 1:
            raise UserError("`model`: explain does not write Gemma 3n's MLP widths that differ per layer (ffn_widths) "
                            "yet; params, kv, flops, memory and latency compute them (docs/gemma3n.md)")

    def explain_symbols(self, encoder_seq: int) -> dict[str, int]:
        return {"n": self.altup_inputs, "r": self.laurel_rank, "p": self.per_layer_width,
                "V_p": self.per_layer_vocab}

    def explain_params(self, spec: Any) -> dict[str, str]:
        """layer_params over the L layers, extra_params once (docs/gemma3n.md#parameters)."""
        norm = spec.norm.explain_params
        return {"altup/router": "L · d · n", "altup/coefs": "L · (n · n · n + n · n)", "altup/output_scale": "L · d",
                "laurel/left": "L · d · r", "laurel/right": "L · r · d", "per_layer/gate": "L · d · p",
                "per_layer/projection": "L · p · d", "norms/block": f"L · 3 · {norm('d')}",
                "embedding/per_layer": "V_p · L · p", "per_layer/model_projection": "d · L · p",
                "norms/per_layer_projection": norm("p"), "altup/projections": "(n − 1) · d · d",
                "altup/unembed": "(n − 1) · d · d"}

    def explain_flops(self, spec: Any, phase: str, passes: Any) -> dict[str, str]:
        """layer_matmuls in each of the L layers and token_matmuls once, 2 FLOPs per weight per token (a training
        step: × its passes)."""
        tokens = "B" if phase == "decode" else "B · S"
        layer = {"altup/router": "2 · d · n", "altup/coefs": "(n · n · n + n · n)", "altup/predict": "d · n · n",
                 "laurel/left": "d · r", "laurel/right": "r · d", "per_layer/gate": "d · p",
                 "per_layer/projection": "p · d"}
        once = {"per_layer/model_projection": "d · L · p", "altup/projections": "(n − 1) · d · d",
                "altup/unembed": "(n − 1) · d · d"}

        def lead(k: str) -> str:
            return f"{passes(k)} · " if phase == "train" else ""

        return ({k: f"{lead(k)}2 · L · {tokens} · {w}" for k, w in layer.items()}
                | {k: f"{lead(k)}2 · {tokens} · {w}" for k, w in once.items()})

    @staticmethod
    def time_op(component: str) -> str:
        """The op a part outside the layers is timed under: its own matmul's (the per-layer projection's norm with
        the projection)."""
        return "per_layer/model_projection" if component.startswith("norms/") else component

    def layer_params(self, spec: Any) -> Parts:
        d, n, r, p = spec.d_model, self.altup_inputs, self.laurel_rank, self.per_layer_width
        return {"altup/router": d * n, "altup/coefs": n * n * n + n * n, "altup/output_scale": d,
                "laurel/left": d * r, "laurel/right": r * d, "per_layer/gate": d * p, "per_layer/projection": p * d,
                "norms/block": 3 * spec.norm.params(d)}

    def layer_matmuls(self, spec: Any) -> Parts:
        """Weights each token meets per layer: the router twice (2·d·n), the coefficients (n³ + n²), AltUp's
        prediction (each stream mixed by its n × n coefficients: d·n² per token, a batched matmul of activations),
        LAuReL (2·d·r) and the per-layer input (2·d·p)."""
        d, n, r, p = spec.d_model, self.altup_inputs, self.laurel_rank, self.per_layer_width
        return {"altup/router": 2 * d * n, "altup/coefs": n * n * n + n * n, "altup/predict": d * n * n,
                "laurel/left": d * r, "laurel/right": r * d, "per_layer/gate": d * p, "per_layer/projection": p * d}

    def extra_params(self, spec: Any) -> Parts:
        d, n, L, p = spec.d_model, self.altup_inputs, spec.n_layers, self.per_layer_width
        return {"embedding/per_layer": self.per_layer_vocab * L * p, "per_layer/model_projection": d * L * p,
                "norms/per_layer_projection": spec.norm.params(p), "altup/projections": (n - 1) * d * d,
                "altup/unembed": (n - 1) * d * d}

    def token_matmuls(self, spec: Any) -> Parts:
        """Every token, whatever the logits: the per-layer projection (d·L·p) and AltUp's projections into and
        out of the streams ((n − 1)·d² each)."""
        d, n, L, p = spec.d_model, self.altup_inputs, spec.n_layers, self.per_layer_width
        return {"per_layer/model_projection": d * L * p, "altup/projections": (n - 1) * d * d,
                "altup/unembed": (n - 1) * d * d}

    def held_params(self, spec: Any) -> Parts:
        return self.extra_params(spec)

    def read_params(self, spec: Any, encode: bool) -> Parts:
        """Every forward reads the projections and the norm whole; the per-layer table only at its tokens' rows."""
        return {k: v for k, v in self.extra_params(spec).items() if k != "embedding/per_layer"}

    def params_note(self) -> str | None:
        return ("Gemma 3n: active = total (no routing); Google's 'effective' parameters (E2B, E4B) leave out the "
                "per-layer embedding table (embedding/per_layer), which can stay off the accelerator (the total "
                "without it below); active_excluding_embedding leaves out the token embedding as well")

    def check_spec(self, spec: Any) -> None:
        if spec.attention.kind != "gemma3n" or spec.hybrid or spec.mixers:
            raise ValueError("attention.kind: a gemma3n stack takes gemma3n attention in every layer (its last layers "
                             "read an earlier layer's K/V); keep attention kind gemma3n, no mixers")
        if spec.ffn.kind not in ("gated", "dense"):
            raise ValueError(f"ffn.kind: a gemma3n stack's MLPs are dense or gated, not {spec.ffn.kind}; give one")
        if spec.attention.shared_kv:
            raise ValueError("attention.shared_kv: the stack sets it for its last kv_shared_layers layers; write false "
                             "and give stack.kv_shared_layers")
        if spec.mtp_modules:
            raise ValueError("mtp_modules: a gemma3n stack has none; set mtp_modules: 0")
        if self.ffn_widths is not None and (len(self.ffn_widths) != spec.n_layers or spec.ffn.d_ff not in
                                            self.ffn_widths):
            raise ValueError(f"stack.ffn_widths: give {spec.n_layers} widths, one per layer, one of them ffn.d_ff (or "
                             "leave ffn_widths out: every layer ffn.d_ff)")
        first = spec.n_layers - self.kv_shared_layers
        if first < 1:
            raise ValueError(f"stack.kv_shared_layers: {self.kv_shared_layers} of {spec.n_layers} layers; leave at "
                             "least one layer that projects its own K/V")
        if self.kv_shared_layers:
            kinds = [spec.layer_pattern[i % len(spec.layer_pattern)] for i in range(spec.n_layers)]
            if not set(kinds[first:]) <= set(kinds[:first]):
                raise ValueError("stack.kv_shared_layers: a shared layer's kind (sliding or full) has no earlier "
                                 "layer to read K/V from; share fewer layers")
