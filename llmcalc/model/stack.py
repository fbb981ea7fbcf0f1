"""What the layer stack is for: a causal decoder that generates, or a bidirectional encoder that reads a whole
sequence in one pass. See docs/encoders.md.

An encoder-decoder (T5) adds an encoder stack and a cross-attention block per decoder layer (EncoderDecoder).
A decoder (the default) adds nothing to the layers: its costs are the ones the rest of llmcalc computes.
An encoder (BERT, RoBERTa, ModernBERT):
  embedding   + T·d token-type table (T segment types, BERT 2, RoBERTa 1), + a norm after the summed
                embeddings (2d with bias)
  pooler      d·d + d: a dense layer with tanh on the first token ([CLS]) of each sequence (BertModel,
                RobertaModel); its FLOPs are 2·B·d² per forward
  attention   bidirectional: every query sees every key, S² pairs per sequence and layer (no causal mask, so
                there is no masked half to skip: both FLOPs conventions give S²); a sliding-window layer of
                window W (ModernBERT's local attention) lets query i see keys j with |i − j| ≤ ⌊W/2⌋:
                S + 2·Σ_{k=1..m}(S − k) = S + 2·m·S − m·(m + 1) pairs, m = min(⌊W/2⌋, S − 1), the unmasked
                count (causal convention); a masked dense kernel computes S² (dense convention)
  no LM head, no KV cache, no decode step: a forward pass is the whole workload.
"""

from typing import Any, ClassVar, Literal

from llmcalc.errors import UserError
from llmcalc.model.attention import linear
from llmcalc.model.base import NonNegInt, Parts, PosInt, Variant
from llmcalc.model.norm import Norm


class Stack(Variant):
    """A stack's role; the defaults are a decoder's. Subclassing registers a new `kind` (llmcalc/model/base.py).

    Asked by params (embedding_params, head_params), flops (prefill_core, prefill_logits, head_matmuls,
    decodes), kv and memory (decodes, lm_head), and the commands that time generation (check_decoding)."""

    kinds: ClassVar[dict[str, type[Variant]]] = {}
    decodes: ClassVar[bool] = True
    """Whether the stack generates token by token, keeping a KV cache between steps."""
    lm_head: ClassVar[bool] = True
    """Whether a forward ends in logits over the vocabulary."""
    sized: ClassVar[bool] = True
    """Whether FLOPs, the caches and memory are modelled for the stack (check_sized refuses them otherwise)."""

    def embedding_params(self, d_model: int, norm: Norm) -> Parts:
        """Parameters beside the token embedding and positions, by component path."""
        return {}

    def head_params(self, d_model: int) -> Parts:
        """Parameters after the last layer other than the final norm and LM head, by component path."""
        return {}

    def layer_params(self, spec: Any) -> Parts:
        """Parameters one layer holds beside its attention, FFN and norms, by component path."""
        return {}

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


class Decoder(Stack):
    """A causal decoder: query i sees keys 1..i; it generates token by token with a KV cache."""

    kind: Literal["decoder"] = "decoder"


class Encoder(Stack):
    """A bidirectional encoder (BERT, RoBERTa, ModernBERT) sized as its bare model (BertModel, RobertaModel,
    ModernBertModel): no LM head, no cache, no decode.

    token_types: rows of the token-type (segment) table, T·d (BERT 2, RoBERTa 1, none 0).
    embedding_norm: a norm over the summed embeddings (BERT, RoBERTa, ModernBERT).
    first_attention_norm: false when layer 0 has no norm before its attention, reading the embedding norm's
    output directly (ModernBERT: an Identity there); its norm.params(d) comes off the layers' norms.
    pooler: a d → d dense layer with bias (tanh) on each sequence's first token, d² + d (BertModel,
    RobertaModel; not ModernBertModel).
    """

    kind: Literal["encoder"] = "encoder"
    token_types: NonNegInt = 0
    embedding_norm: bool = False
    first_attention_norm: bool = True
    pooler: bool = False
    decodes: ClassVar[bool] = False
    lm_head: ClassVar[bool] = False

    def embedding_params(self, d_model: int, norm: Norm) -> Parts:
        """T·d token-type table; the embedding norm's 2d (d without bias); − norm(d) off norms/layer without
        layer 0's attention norm."""
        parts = {"embedding/token_type": self.token_types * d_model}
        parts |= {"norms/embedding": norm.params(d_model)} if self.embedding_norm else {}
        return parts | ({} if self.first_attention_norm else {"norms/layer": -norm.params(d_model)})

    def head_params(self, d_model: int) -> Parts:
        """The pooler: d·d + d."""
        return {"pooler": linear(d_model, d_model, True)} if self.pooler else {}

    def head_matmuls(self, d_model: int) -> Parts:
        """The pooler's d·d weights, applied to one token per sequence."""
        return {"pooler": d_model * d_model} if self.pooler else {}

    def pairs(self, seq: int, window: int | None, convention: str) -> int:
        """(query, key) pairs of one sequence in a layer: S² in a full layer or under the dense convention;
        in a sliding layer the unmasked band |i − j| ≤ ⌊W/2⌋, S + 2·m·S − m·(m + 1), m = min(⌊W/2⌋, S − 1)."""
        if window is None or convention == "dense":
            return seq * seq
        m = min(window // 2, seq - 1)
        return seq + 2 * m * seq - m * (m + 1)

    def prefill_pairs(self, attention: Any, seq: int, window: int | None, convention: str) -> int:
        """pairs(): bidirectional, whatever the attention's causal count."""
        return self.pairs(seq, window, convention)

    def prefill_core(self, attention: Any, seq: int, window: int | None, convention: str) -> Parts:
        """pairs × the attention's per-pair cost."""
        return attention.core_from({"pairs": self.pairs(seq, window, convention)}, seq)

    def prefill_logits(self, positions: int) -> int:
        """0: the bare encoder has no LM head."""
        return 0

    def check_decoding(self, field: str) -> None:
        raise UserError(f"`{field}`: an encoder-only model reads its input in one forward pass and generates "
                        "nothing; size it with params, flops and memory (flops' prefill is the forward pass)")

    def check_modelled(self, what: str) -> None:
        raise UserError(f"`model`: {what} of an encoder-only model is not modelled; params, flops, kv and memory "
                        "(inference and training) are")

    def params_note(self) -> str | None:
        return ("encoder sized as its bare model (BertModel, RobertaModel, ModernBertModel): token-type table and "
                "embedding norm counted, pooler " + ("counted (d² + d)" if self.pooler else "absent")
                + "; no LM head (a masked-LM head adds d² + d, a norm and a V bias; its decoder is tied)")

    def flops_note(self) -> str | None:
        return ("encoder: FLOPs per forward of B sequences of S tokens; bidirectional attention, S² (query, key) "
                "pairs per sequence and full layer (nothing is masked, so the causal and dense conventions agree); "
                "a sliding layer of window W: the band |i − j| ≤ ⌊W/2⌋ (causal: unmasked pairs only) or S² "
                "(dense); no LM head, no decode step (decode and generate are 0)")

    def check_spec(self, spec: Any) -> None:
        if spec.mtp_modules:
            raise ValueError("mtp_modules: an encoder predicts no next tokens; set mtp_modules: 0")
        if spec.attention.kind != "gqa":
            raise ValueError(f"attention.kind: {spec.attention.kind} is not modelled in an encoder; use gqa")
        if not spec.tie_embeddings or spec.lm_head_bias:
            raise ValueError("tie_embeddings: an encoder has no LM head; set tie_embeddings: true and "
                             "lm_head_bias: false")


class EncoderDecoder(Stack):
    """An encoder-decoder (T5, BART): a bidirectional encoder of `encoder_layers` layers shaped like the decoder's
    (its attention and FFN, `norm.per_layer` norms, a final norm when `norm.final`), and the spec's `n_layers`
    decoder layers, each with a cross-attention block (the self-attention's shape: q from the decoder, k and v
    from the encoder's output) and its norm. The token embedding is shared by both stacks; a position kind
    with a table per stack (T5's relative bias) has one in each.

    Sized here: parameters. FLOPs, the caches (the self-attention cache growing, the cross cache fixed at
    layers · 2 · kv width · encoder length) and memory are not modelled yet."""

    kind: Literal["encoder-decoder"] = "encoder-decoder"
    sized: ClassVar[bool] = False
    encoder_layers: PosInt
    embedding_norm: bool = False
    """A norm over each stack's summed embeddings (BART's layernorm_embedding)."""

    def embedding_params(self, d_model: int, norm: Norm) -> Parts:
        """The decoder's embedding norm (the encoder's is under encoder/)."""
        return {"norms/embedding": norm.params(d_model)} if self.embedding_norm else {}

    def layer_params(self, spec: Any) -> Parts:
        """One decoder layer's cross-attention (as its self-attention) and the norm before it."""
        parts = {f"cross_attention/{k}": v for k, v in spec.attention.params(spec.d_model).items()}
        return parts | {"norms/cross": spec.norm.params(spec.d_model)}

    def extra_params(self, spec: Any) -> Parts:
        """The encoder: L_e · (attention + FFN + per_layer norms), its final norm, its position table and its
        embedding norm."""
        d, n, norm = spec.d_model, self.encoder_layers, spec.norm
        parts = {"encoder/position": spec.positions.params(spec.max_seq_len, d, spec.attention)}
        parts |= {"encoder/norms/embedding": norm.params(d)} if self.embedding_norm else {}
        parts |= {f"encoder/attention/{k}": n * v for k, v in spec.attention.params(d).items()}
        parts |= {f"encoder/ffn/{k}": n * v for k, v in spec.ffn.params(d).items()}
        parts["encoder/norms/layer"] = n * norm.per_layer * norm.params(d)
        parts["encoder/norms/final"] = norm.params(d) if norm.final else 0
        return parts

    def check_decoding(self, field: str) -> None:
        self.check_modelled("time")

    def check_modelled(self, what: str) -> None:
        raise UserError(f"`model`: {what} of an encoder-decoder model is not modelled yet; params is")


    def params_note(self) -> str | None:
        return (f"encoder-decoder: {self.encoder_layers} encoder layers under encoder/, the decoder's layers with "
                "their cross-attention; the token embedding is shared by encoder, decoder (and a tied LM head)")

    def check_spec(self, spec: Any) -> None:
        if spec.mtp_modules:
            raise ValueError("mtp_modules: not modelled in an encoder-decoder; set mtp_modules: 0")
        if spec.attention.kind != "gqa" or spec.ffn.kind == "moe":
            raise ValueError("attention.kind: an encoder-decoder is modelled with gqa attention and a dense or gated "
                             "FFN")
