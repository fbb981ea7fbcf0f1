"""What the layer stack is for: a causal decoder that generates, or a bidirectional encoder that reads a whole
sequence in one pass. See docs/encoders.md.

A decoder (the default) adds nothing to the layers: its costs are the ones the rest of llmcalc computes.
An encoder (BERT, RoBERTa, ModernBERT):
  embedding   + T·d token-type table (T segment types, BERT 2, RoBERTa 1), + a norm after the summed
                embeddings (2d with bias)
  pooler      d·d + d: a dense layer with tanh on the first token ([CLS]) of each sequence (BertModel,
                RobertaModel); its FLOPs are 2·B·d² per forward
  attention   bidirectional: every query sees every key, S² pairs per sequence and layer (no causal mask, so
                there is no masked half to skip: both FLOPs conventions give S²)
  no LM head, no KV cache, no decode step: a forward pass is the whole workload.
"""

from typing import Any, ClassVar, Literal

from llmcalc.errors import UserError
from llmcalc.model.attention import linear
from llmcalc.model.base import NonNegInt, Parts, Variant
from llmcalc.model.norm import Norm


class Stack(Variant):
    """A stack's role; the defaults are a decoder's. Subclassing registers a new `kind` (llmcalc/model/base.py).

    Asked by params (embedding_params, head_params), flops (core_convention, prefill_logits, head_matmuls,
    decodes), kv and memory (decodes, lm_head), and the commands that time generation (check_decoding)."""

    kinds: ClassVar[dict[str, type[Variant]]] = {}
    decodes: ClassVar[bool] = True
    """Whether the stack generates token by token, keeping a KV cache between steps."""
    lm_head: ClassVar[bool] = True
    """Whether a forward ends in logits over the vocabulary."""

    def embedding_params(self, d_model: int, norm: Norm) -> Parts:
        """Parameters beside the token embedding and positions, by component path."""
        return {}

    def head_params(self, d_model: int) -> Parts:
        """Parameters after the last layer other than the final norm and LM head, by component path."""
        return {}

    def head_matmuls(self, d_model: int) -> Parts:
        """Weights of the head's matmuls applied once per sequence (not per token), by component path."""
        return {}

    def core_convention(self, attention: str) -> str:
        """The attention-core convention a prefill counts: the workload's (causal or dense) for a decoder."""
        return attention

    def prefill_logits(self, positions: int) -> int:
        """Positions a prefill projects onto the vocabulary, given the workload's choice (last: 1, all: S)."""
        return positions

    def check_decoding(self, field: str) -> None:
        """Refuses a cost of generation (latency, serving) on a stack that does not generate; `field` names
        the input that asked for it."""

    def check_modelled(self, what: str) -> None:
        """Refuses a figure (`what`) that llmcalc computes for decoders only."""

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
    pooler: a d → d dense layer with bias (tanh) on each sequence's first token, d² + d (BertModel,
    RobertaModel; not ModernBertModel).
    """

    kind: Literal["encoder"] = "encoder"
    token_types: NonNegInt = 0
    embedding_norm: bool = False
    pooler: bool = False
    decodes: ClassVar[bool] = False
    lm_head: ClassVar[bool] = False

    def embedding_params(self, d_model: int, norm: Norm) -> Parts:
        """T·d token-type table; the embedding norm's 2d (d without bias)."""
        parts = {"embedding/token_type": self.token_types * d_model}
        return parts | ({"norms/embedding": norm.params(d_model)} if self.embedding_norm else {})

    def head_params(self, d_model: int) -> Parts:
        """The pooler: d·d + d."""
        return {"pooler": linear(d_model, d_model, True)} if self.pooler else {}

    def head_matmuls(self, d_model: int) -> Parts:
        """The pooler's d·d weights, applied to one token per sequence."""
        return {"pooler": d_model * d_model} if self.pooler else {}

    def core_convention(self, attention: str) -> str:
        """dense: with no mask every one of the S² pairs is computed, whatever the workload's convention."""
        return "dense"

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
                "pairs per sequence and layer (nothing is masked, so the causal and dense conventions agree); "
                "no LM head, no decode step (decode and generate are 0)")

    def check_spec(self, spec: Any) -> None:
        if spec.mtp_modules:
            raise ValueError("mtp_modules: an encoder predicts no next tokens; set mtp_modules: 0")
        if not spec.tie_embeddings or spec.lm_head_bias:
            raise ValueError("tie_embeddings: an encoder has no LM head; set tie_embeddings: true and "
                             "lm_head_bias: false")
