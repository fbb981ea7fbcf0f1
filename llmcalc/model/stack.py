"""What the layer stack is for: a causal decoder that generates, or a bidirectional encoder that reads a whole
sequence in one pass. See docs/encoders.md.

A decoder (the default) adds nothing to the layers: its costs are the ones the rest of llmcalc computes. The encoder
(BERT, RoBERTa, ModernBERT) and the encoder-decoder (T5, BART, Whisper) are in llmcalc/model/encoders.py, imported
when a spec names one of their kinds (Stack.variant_modules).
"""

from typing import Any, ClassVar, Literal

from llmcalc.errors import UserError
from llmcalc.model.base import Parts, Variant
from llmcalc.model.norm import Norm


class Stack(Variant):
    """A stack's role; the defaults are a decoder's. Subclassing registers a new `kind` (llmcalc/model/base.py).

    Asked by params (embedding_params, head_params), flops (prefill_core, prefill_logits, head_matmuls,
    decodes), kv and memory (decodes, lm_head), and the commands that time generation (check_decoding)."""

    kinds: ClassVar[dict[str, type[Variant]]] = {}
    variant_modules: ClassVar[dict[str, str]] = {
        "decoder": "llmcalc.model.stack", "encoder": "llmcalc.model.encoders",
        "encoder-decoder": "llmcalc.model.encoders", "gemma3n": "llmcalc.model.gemma3n"}
    """Each kind's module, imported when a spec names the kind (Variant)."""
    decodes: ClassVar[bool] = True
    """Whether the stack generates token by token, keeping a KV cache between steps."""
    lm_head: ClassVar[bool] = True
    """Whether a forward ends in logits over the vocabulary."""
    sized: ClassVar[bool] = True
    """Whether FLOPs, the caches and memory are modelled for the stack (check_sized refuses them otherwise)."""
    explained: ClassVar[bool] = True
    """Whether `explain` works the stack's figures out (check_explained refuses it otherwise)."""
    marker: ClassVar[str] = ""
    """The stack's role in a few characters beside its mixers in `llmcalc presets` (a decoder's: none)."""

    def embedding_params(self, d_model: int, norm: Norm) -> Parts:
        """Parameters beside the token embedding and positions, by component path."""
        return {}

    def head_params(self, d_model: int) -> Parts:
        """Parameters after the last layer other than the final norm and LM head, by component path."""
        return {}

    def layer_params(self, spec: Any) -> Parts:
        """Parameters one layer holds beside its attention, FFN and norms, by component path."""
        return {}

    def layer_matmuls(self, spec: Any) -> Parts:
        """Weights each token meets in every layer beside its attention and FFN (Gemma 3n's AltUp, LAuReL and
        per-layer input), by component path; none."""
        return {}

    def token_matmuls(self, spec: Any) -> Parts:
        """Weights each token meets once per forward outside the layers and the LM head (Gemma 3n's per-layer input
        projection and AltUp's stream projections), by component path; none."""
        return {}

    @property
    def layer_ffn_widths(self) -> list[int] | None:
        """Each layer's FFN width where layers differ (Gemma 3n's MatFormer slices: ModelSpec.layer_groups); None:
        the spec's FFN in every layer."""
        return None

    @property
    def kv_reading_layers(self) -> int:
        """The last layers that project no K/V but read an earlier layer's (Gemma 3n's num_kv_shared_layers); their
        mixer is the attention's reading_shared_kv() (ModelSpec.layer_groups); none."""
        return 0

    def extra_params(self, spec: Any) -> Parts:
        """Parameters of a second stack (an encoder-decoder's encoder), by component path."""
        return {}

    def head_matmuls(self, d_model: int) -> Parts:
        """Weights of the head's matmuls applied once per sequence (not per token), by component path."""
        return {}

    def prefill_core(self, attention: Any, seq: int, window: int | None, convention: str) -> Parts:
        """Attention-core FLOPs of one sequence's prefill of `seq` tokens in a layer of `window`, by component:
        causal pairs for a decoder (the attention's own core)."""
        return attention.core(seq, 0, window, convention)

    def prefill_pairs(self, attention: Any, seq: int, window: int | None, convention: str) -> int:
        """(query, key) pairs of one sequence's prefill of `seq` tokens in a layer of `window` (the attention's
        own count for a decoder)."""
        return attention.pairs(seq, 0, window, convention)

    def prefill_logits(self, positions: int) -> int:
        """Positions a prefill projects onto the vocabulary, given the workload's choice (last: 1, all: S)."""
        return positions

    def check_decoding(self, field: str) -> None:
        """Refuses a cost of generation (latency, serving) on a stack that does not generate; `field` names
        the input that asked for it."""

    def check_modelled(self, what: str) -> None:
        """Refuses a figure (`what`) that llmcalc computes for decoders only."""

    def check_explained(self) -> None:
        """Refuses `explain` of a stack whose terms it does not write (not `explained`)."""
        if not self.explained:
            self.check_modelled("explain")

    def check_sized(self, what: str) -> None:
        """Refuses a size (`what`: FLOPs, a cache, memory) that is not modelled for this stack (not `sized`)."""
        if not self.sized:
            self.check_modelled(what)

    def params_note(self) -> str | None:
        """What a parameter count of this stack includes, where it differs from a decoder's."""
        return None

    def flops_note(self) -> str | None:
        """How the FLOPs of this stack are counted, where it differs from a decoder's."""
        return None

    def check_spec(self, spec: Any) -> None:
        """Checks against the rest of the spec."""

    def encoder_length(self, encoder_seq: int | None, seq: int) -> int:
        """Tokens each sequence's encoder reads (`encoder_seq`); 0 for a stack without a separate encoder, which
        refuses an `encoder_seq` given."""
        if encoder_seq is not None:
            raise UserError("`encoder_seq`: only an encoder-decoder model (T5, BART, Whisper) reads a separate "
                            "encoder input; drop it (this model's input is `seq`)")
        return 0

    def encoder_flops(self, spec: Any, batch: int, new: int, encoder_seq: int, encode: bool) -> Parts:
        """FLOPs of the encoder and the cross-attention, by component, for `new` decoder tokens of each of `batch`
        sequences (`encode`: the phase runs the encoder over `encoder_seq` tokens first); {} without an encoder."""
        return {}

    def cross_cache_bytes(self, spec: Any, batch: int, encoder_seq: int, bits: int) -> int:
        """Bytes of the cross-attention cache of `batch` sequences whose encoder read `encoder_seq` tokens; 0."""
        return 0

    def held_params(self, spec: Any) -> Parts:
        """Parameters beside the layers, the embedding and the head that the GPU serving the model holds (an
        encoder-decoder's encoder and embedding norm), by component; none."""
        return {}

    def read_params(self, spec: Any, encode: bool) -> Parts:
        """Of held_params, those one forward reads whole (`encode`: the forward runs the encoder), by component."""
        return {}

    explain_legend: ClassVar[dict[str, str]] = {}
    """Meanings of the symbols the stack's explain terms write beyond the spec's."""

    def explain_symbols(self, encoder_seq: int) -> dict[str, int]:
        """The symbols of the stack's explain terms; none."""
        return {}

    def explain_params(self, spec: Any) -> dict[str, str]:
        """held_params' components beside the layers as formulas (an encoder-decoder's encoder), by component; and
        layer_params' per decoder layer (written L · …); none."""
        return {}

    def explain_flops(self, spec: Any, phase: str, passes: Any) -> dict[str, str]:
        """encoder_flops' components of a phase (prefill, decode, train; `passes`(component): a training step's
        forward + backward passes) as formulas; none."""
        return {}

    def explain_kv(self, spec: Any, bits: int) -> dict[str, str]:
        """cross_cache_bytes as formulas, by name; none."""
        return {}

    def explain_activations(self, decoder: str) -> str:
        """The inference activation peak as a formula, given the decoder's (`decoder`): the decoder's."""
        return decoder

    def encoder_vars(self, batch: int, new: int, encoder_seq: int) -> dict[str, int]:
        """The cost form's variables of a second stack at a point (llmcalc/costs/step.py: step_costs); none."""
        return {}

    def time_terms(self, spec: Any, tokens: Any, seqs: Any, enc_tokens: Any, enc_pairs: Any, cross_pairs: Any,
                   encode: bool, act: int, bits: int) -> dict[str, list]:
        """[FLOPs, bytes, row FLOPs] by op of what the stack runs beside the layers in one forward (an
        encoder-decoder's encoder and cross-attention); none."""
        return {}

    def time_kernels(self, spec: Any, encode: bool) -> dict[str, int]:
        """Kernels one forward launches beside the layers', by op (time_terms' ops); none."""
        return {}

    def layer_time_terms(self, spec: Any, tokens: Any, enc_tokens: Any, cross_pairs: Any, encode: bool, act: int,
                         bits: int) -> dict[str, list]:
        """[FLOPs, bytes, row FLOPs] by op of what the stack adds to each layer in one forward (an encoder-decoder's
        cross-attention); none."""
        return {}

    def layer_time_kernels(self, spec: Any, encode: bool) -> dict[str, int]:
        """Kernels the stack adds to each layer per forward, by op (layer_time_terms'); none."""
        return {}

    def unread_weights(self, encode: bool) -> frozenset[str]:
        """Components of a layer's weights a forward does not read (`encode`: it runs the encoder); none."""
        return frozenset()

    def time_note(self) -> str | None:
        """What latency's figures of this stack include beyond a decoder's; None."""
        return None

    def check_timed(self, field: str, layout: Any) -> None:
        """Refuses `latency` and `sweep` where their time is not modelled: as check_decoding."""
        self.check_decoding(field)

    def cross_cache_note(self, encoder_seq: int) -> str | None:
        """What the cross-attention cache holds, for kv's notes; None without one."""
        return None

    def encoder_flops_note(self) -> str | None:
        """How the encoder and the cross-attention are counted in FLOPs, added to the decoder's notes; None."""
        return None

    def stem_elements(self, encoder_seq: int, d_model: int) -> int:
        """Activation elements per sequence an input stem holds at its largest stage before the encoder's first
        layer; 0 without one."""
        return 0

    def train_passes(self, component: str) -> int | None:
        """Forward + backward passes of a component of the stack's own in a training step, where not the usual 3
        (None: the component's own rule)."""
        return None


class Decoder(Stack):
    """A causal decoder: query i sees keys 1..i; it generates token by token with a KV cache."""

    kind: Literal["decoder"] = "decoder"
