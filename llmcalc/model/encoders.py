"""The stacks with an encoder: an encoder alone (Encoder), and an encoder-decoder (T5, BART, Whisper), which adds an
encoder stack and a cross-attention block per decoder layer (EncoderDecoder; docs/encoder-decoder.md). Imported when a
spec names one of their kinds (Stack.variant_modules in llmcalc/model/stack.py), not with every spec. See
docs/encoders.md.

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
from llmcalc.model.base import NonNegInt, Parts, PosInt
from llmcalc.model.norm import Norm
from llmcalc.model.stack import Stack
from llmcalc.model.terms import cached_bytes, prod
from llmcalc.model.units import MAC

STEM_KERNEL = 3
"""Width of Whisper's two audio convolutions."""


def _wrap(term: str) -> str:
    """A term as one factor of a product (parenthesised when it holds a top-level + − /)."""
    return prod(term)


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
    marker: ClassVar[str] = "enc"
    token_types: NonNegInt = 0
    embedding_norm: bool = False
    first_attention_norm: bool = True
    pooler: bool = False
    decodes: ClassVar[bool] = False
    lm_head: ClassVar[bool] = False
    explained: ClassVar[bool] = False

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
    """An encoder-decoder (T5, BART, Whisper): a bidirectional encoder of `encoder_layers` layers shaped like the
    decoder's (its attention and FFN, `norm.per_layer` norms, a final norm when `norm.final`), and the spec's `n_layers`
    decoder layers, each with a cross-attention block (the self-attention's shape: q from the decoder, k and v
    from the encoder's output) and its norm. The token embedding is shared by both stacks; a position kind
    with a table per stack (T5's relative bias) has one in each.

    FLOPs (encoder_flops; docs/encoder-decoder.md#flops), with S_e encoder tokens and S decoder tokens per sequence:
      audio stem  2·k·mel·d·(2·S_e) + 2·k·d²·S_e                    Whisper's two Conv1d (k = 3), per sequence
      encode      L_e · [2·S_e·(W_attn + W_ffn) + S_e²·c_pair]      bidirectional: S_e² pairs, whatever the convention
      cross K/V   L_d · 2·S_e·(W_k + W_v)                           the encoder output projected once per sequence
      cross       L_d · [2·S·(W_q + W_o) + S·S_e·c_pair]             S decoder queries over the S_e encoder keys
    a prefill is encode + cross K/V + the decoder's S tokens with their cross; a decode step one token's cross
    (q, o and S_e pairs), nothing re-encoded or re-projected.
    Cross-attention cache (cross_cache_bytes): L_d · B · S_e · 2·H_kv·h elements, fixed as the decoder grows.

    encoder_frames: a fixed encoder length (Whisper: its audio is padded to 30 s, max_source_positions frames
    after the conv stem); None: the encoder reads `encoder_seq` tokens, `seq` when not given (T5, BART)."""

    kind: Literal["encoder-decoder"] = "encoder-decoder"
    marker: ClassVar[str] = "enc-dec"
    encoder_layers: PosInt
    encoder_frames: PosInt | None = None
    mel_bins: PosInt | None = None
    """Whisper's audio stem before the encoder: Conv1d(mel_bins → d, k 3) over 2·S_e mel frames, then Conv1d(d → d,
    k 3, stride 2) down to S_e, both with biases; None: the token embedding feeds the encoder (T5, BART)."""
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
        """The encoder: L_e · (attention + FFN + per_layer norms), its final norm, its position table (encoder_frames
        rows where fixed, else max_seq_len), its embedding norm, and Whisper's conv stem: 3·mel·d + d + 3·d² + d."""
        d, n, norm = spec.d_model, self.encoder_layers, spec.norm
        parts = {"encoder/position": spec.positions.params(self.encoder_frames or spec.max_seq_len, d, spec.attention)}
        if self.mel_bins:  # two Conv1d with biases: k·C_in·C_out + C_out each
            parts["encoder/conv_stem"] = STEM_KERNEL * self.mel_bins * d + d + STEM_KERNEL * d * d + d
        parts |= {"encoder/norms/embedding": norm.params(d)} if self.embedding_norm else {}
        parts |= {f"encoder/attention/{k}": n * v for k, v in spec.attention.params(d).items()}
        parts |= {f"encoder/ffn/{k}": n * v for k, v in spec.ffn.params(d).items()}
        parts["encoder/norms/layer"] = n * norm.per_layer * norm.params(d)
        parts["encoder/norms/final"] = norm.params(d) if norm.final else 0
        return parts

    def encoder_length(self, encoder_seq: int | None, seq: int) -> int:
        """`encoder_frames` where the stack fixes it (a different `encoder_seq` refused), else `encoder_seq`, else
        `seq`."""
        if self.encoder_frames is not None:
            if encoder_seq not in (None, self.encoder_frames):
                raise UserError(f"`encoder_seq`: this model's encoder always reads {self.encoder_frames:,} frames "
                                f"(its input is padded to that length); drop it or give {self.encoder_frames}")
            return self.encoder_frames
        return seq if encoder_seq is None else encoder_seq

    def encoder_flops(self, spec: Any, batch: int, new: int, encoder_seq: int, encode: bool) -> Parts:
        """encode (when `encode`): per encoder layer 2·B·S_e·W for each attention and FFN matmul, B·S_e² pairs ×
        the attention's per-pair cost; the cross K/V projections 2·B·S_e·W per decoder layer (when `encode`);
        the cross queries and output 2·B·new·W, and B·new·S_e pairs, per decoder layer (encoder_terms with
        E = B·S_e, E2 = B·S_e², T = B·new, X = B·new·S_e)."""
        e = batch * encoder_seq
        return self.encoder_terms(spec, e if encode else 0, e * encoder_seq if encode else 0, batch * new,
                                  batch * new * encoder_seq)

    def encoder_terms(self, spec: Any, enc_tokens: Any, enc_pairs: Any, tokens: Any, cross_pairs: Any) -> Parts:
        """FLOPs by component, linear in four counts (ints, or the cost form's variables): E encoder tokens
        (0: nothing encoded), E2 = Σ_seq S_e² encoder pairs, T decoder tokens and X = Σ_tokens S_e cross pairs:
          audio stem  2·k·mel·d·2E + 2·k·d²·E
          encode      L_e · [2·E·(W_attn + W_ffn) + E2·c_pair]
          cross       L_d · cross_terms"""
        attn, d, n = spec.attention, spec.d_model, self.encoder_layers
        out: dict[str, Any] = {}
        if self.mel_bins:  # 2·k·C_in·C_out per output frame: 2·S_e frames of conv1, S_e of conv2
            out["encoder/conv1"] = MAC * STEM_KERNEL * self.mel_bins * d * 2 * enc_tokens
            out["encoder/conv2"] = MAC * STEM_KERNEL * d * d * enc_tokens
        out |= {f"encoder/attention/{k}": n * MAC * enc_tokens * w for k, w in attn.matmuls(d).items()}
        out |= {f"encoder/attention/{k}": n * v for k, v in attn.core_from({"pairs": enc_pairs}, enc_tokens).items()}
        out |= {f"encoder/ffn/{k}": n * MAC * enc_tokens * w for k, w in spec.ffn.matmuls(d).items()}
        if isinstance(enc_tokens, int) and not enc_tokens:  # nothing encoded: no encoder rows
            out = {}
        return out | {k: spec.n_layers * v for k, v in self.cross_terms(spec, enc_tokens, tokens, cross_pairs).items()}

    def cross_terms(self, spec: Any, enc_tokens: Any, tokens: Any, cross_pairs: Any) -> Parts:
        """One decoder layer's cross-attention FLOPs by component: the K/V projection of E encoder tokens
        2·E·(W_k + W_v) (0: projected before), the queries and output of T tokens 2·T·(W_q + W_o), and X pairs
        × the attention's per-pair cost."""
        attn, d = spec.attention, spec.d_model
        out = {f"cross_attention/{k}": MAC * (enc_tokens if k in ("k", "v") else tokens) * w
               for k, w in attn.matmuls(d).items()}
        return out | {f"cross_attention/{k}": v for k, v in attn.core_from({"pairs": cross_pairs}, tokens).items()}

    def encoder_vars(self, batch: int, new: int, encoder_seq: int) -> dict[str, int]:
        """The cost form's encoder variables at a point of `batch` sequences of `new` decoder tokens each:
        E = B·S_e, E2 = B·S_e², X = B·new·S_e."""
        return {"E": batch * encoder_seq, "E2": batch * encoder_seq * encoder_seq, "X": batch * new * encoder_seq}

    def time_terms(self, spec: Any, tokens: Any, seqs: Any, enc_tokens: Any, enc_pairs: Any, cross_pairs: Any,
                   encode: bool, act: int, bits: int) -> dict[str, list]:
        """[FLOPs, activation bytes, row FLOPs] of the encoder in the forward that encodes (`encode`, a prefill), by
        op (time_op), linear in E encoder tokens and E2 encoder pairs (weights are the caller's; the cross-attention
        is each decoder layer's: layer_time_terms). Bytes at `act` bytes per activation element:
          embedding   E·d·(2 + a)                    each encoder position's row read (as the decoder's tokens)
          stem        a·E·(2·mel + 5·d)              conv1 reads 2E·mel, writes 2E·d; conv2 reads 2E·d, writes E·d
          encoder     L_e · a·E·(Σ io + 2·H·h + 2·H_kv·h)   each projection's in + out, the core's Q, O, K, V"""
        if not encode:
            return {}
        attn, ffn, d, L_e = spec.attention, spec.ffn, spec.d_model, self.encoder_layers
        out: dict[str, list] = {}
        for comp, f in self.encoder_terms(spec, enc_tokens, enc_pairs, 0, 0).items():
            if comp.startswith("encoder/"):
                out.setdefault(self.time_op(comp), [0, 0, 0])[0] += f
        for comp, f in self.encoder_terms(spec, 1, 0, 0, 0).items():  # one more row of each weight matmul
            if comp.startswith("encoder/") and not comp.startswith("encoder/conv") and self.time_op(comp) != \
                    "encoder/core":
                out[self.time_op(comp)][2] += f
        out["embedding"] = [0, enc_tokens * d * (2 + act), 0]  # each encoder position's embedding (and position) row
        if self.mel_bins:
            out["encoder/stem"][1] += act * enc_tokens * (2 * self.mel_bins + 5 * d)
        out["encoder/proj"][1] += L_e * act * enc_tokens * sum(attn.io(d).values())
        out["encoder/core"][1] += L_e * act * enc_tokens * (attn.query_io() + attn.key_value_io())
        out["encoder/ffn"][1] += L_e * act * enc_tokens * sum(ffn.io(d).values())
        return out

    def layer_time_terms(self, spec: Any, tokens: Any, enc_tokens: Any, cross_pairs: Any, encode: bool, act: int,
                         bits: int) -> dict[str, list]:
        """[FLOPs, activation and cache bytes, row FLOPs] of one decoder layer's cross-attention in one forward, by
        op (cross_attention/proj, cross_attention/core), linear in T decoder tokens, E encoder tokens and X cross
        pairs (cross_terms); `encode` (a prefill) projects K and V of the E positions and writes them to the cross
        cache; every forward reads the cross cache (E positions of K and V):
          proj   2·T·(W_q + W_o) [+ 2·E·(W_k + W_v)];  a·(T·(io_q + io_o) [+ E·(io_k + io_v)])
          core   X · c_pair;  a·T·2·H·h + cross cache read [+ written]"""
        attn, d = spec.attention, spec.d_model
        e = enc_tokens if encode else 0
        out = {"cross_attention/proj": [0, 0, 0], "cross_attention/core": [0, 0, 0]}
        for comp, f in self.cross_terms(spec, e, tokens, cross_pairs).items():
            out[self.time_op(comp)][0] += f
        for comp, f in self.cross_terms(spec, 1 if encode else 0, 1, 0).items():  # one more row of each matmul
            out[self.time_op(comp)][2] += f if self.time_op(comp) == "cross_attention/proj" else 0
        io, cache = attn.io(d), attn.cache_bytes(enc_tokens, bits)
        out["cross_attention/proj"][1] += act * (tokens * (io["q"] + io["o"]) + e * (io["k"] + io["v"]))
        out["cross_attention/core"][1] += act * tokens * attn.query_io() + cache * (2 if encode else 1)
        return out

    def unread_weights(self, encode: bool) -> frozenset[str]:
        """A decode step projects nothing from the encoder: the cross-attention's K and V weights go unread."""
        return frozenset() if encode else frozenset({"cross_attention/k", "cross_attention/v"})

    def layer_time_kernels(self, spec: Any, encode: bool) -> dict[str, int]:
        """Per decoder layer: each cross-attention matmul (q, o; k, v when encoding) with its norm, and its core."""
        cross = sum(1 for k in spec.attention.matmuls(spec.d_model) if encode or k not in ("k", "v"))
        return {"cross_attention/proj": cross + 1, "cross_attention/core": 1}

    @staticmethod
    def time_op(component: str) -> str:
        """The op of a component of the encoder or the cross-attention: encoder/stem (the convolutions),
        encoder/core, encoder/proj, encoder/ffn, cross_attention/core, cross_attention/proj (norms and position
        tables go with the projections); the decoder's embedding norm: embedding."""
        head, _, tail = component.partition("/")
        if head not in ("encoder", "cross_attention"):  # the decoder's embedding norm
            return "embedding"
        if head == "cross_attention":
            return "cross_attention/core" if tail.startswith("core") or tail == "sinks" else "cross_attention/proj"
        if tail.startswith("conv"):
            return "encoder/stem"
        if tail.startswith("ffn/"):
            return "encoder/ffn"
        sub = tail.partition("/")[2]
        return "encoder/core" if sub.startswith("core") or sub == "sinks" else "encoder/proj"

    def train_passes(self, component: str) -> int | None:
        """2 for the first audio convolution: its input, the mel features, needs no gradient, so its backward is the
        weight gradient alone."""
        return 2 if component == "encoder/conv1" else None

    def stem_elements(self, encoder_seq: int, d_model: int) -> int:
        """Whisper's conv stem at its peak: the mel features (m · 2·S_e), the first convolution's output and its
        GELU (d · 2·S_e each, both held until the GELU returns); 0 without a stem."""
        return 0 if not self.mel_bins else 2 * encoder_seq * (self.mel_bins + 2 * d_model)

    def cross_cache_bytes(self, spec: Any, batch: int, encoder_seq: int, bits: int) -> int:
        """L_d · B · S_e · 2·H_kv·h elements (K and V of every encoder position in each decoder layer)."""
        return spec.n_layers * spec.attention.cache_bytes(batch * encoder_seq, bits)

    def cross_cache_note(self, encoder_seq: int) -> str | None:
        return (f"cross-attention cache: K and V of the encoder's {encoder_seq:,} positions in each decoder layer, "
                "computed once from the encoder output and fixed as the decoder grows (cross_bytes_per_sequence)")

    explain_legend: ClassVar[dict[str, str]] = {
        "L_e": "encoder layers", "S_e": "encoder positions per sequence (`encoder_seq`; Whisper: its fixed frames)",
        "S_src": "rows of the encoder's position table", "m_el": "mel bins (Whisper's audio features)",
        "k_c": "audio convolution width (3)", "m_e": "bytes per encoder token of its largest layer stage beyond the "
        "residual and the normed input (docs/formulas.md#inference-peak)"}

    def explain_symbols(self, encoder_seq: int) -> dict[str, int]:
        """L_e, S_e, S_src and, with an audio stem, m_el and k_c."""
        out = {"L_e": self.encoder_layers, "S_e": encoder_seq, "S_src": self.encoder_frames or 0}
        return out | ({"m_el": self.mel_bins, "k_c": STEM_KERNEL} if self.mel_bins else {})

    def explain_params(self, spec: Any) -> dict[str, str]:
        """Per decoder layer: the cross-attention (as the self-attention's parts) and its norm; the decoder's
        embedding norm; the encoder: its position table (S_src rows where fixed, else S_max), the audio stem
        k·m·d + d + k·d² + d, its embedding norm, L_e × (attention + FFN + n_norm norms), its final norm."""
        attn, ffn, norm = spec.attention, spec.ffn, spec.norm
        out = {f"cross_attention/{k}": f"L · {_wrap(p)}" for k, (p, _) in attn.explain_parts().items()}
        out["norms/cross"] = f"L · {_wrap(norm.explain_params('d'))}"
        out |= {"norms/embedding": norm.explain_params("d")} if self.embedding_norm else {}
        position = spec.positions.explain_params()
        out["encoder/position"] = position.replace("S_max", "S_src") if self.encoder_frames else position
        if self.mel_bins:
            out["encoder/conv_stem"] = "k_c · m_el · d + d + k_c · d · d + d"
        out |= {"encoder/norms/embedding": norm.explain_params("d")} if self.embedding_norm else {}
        out |= {f"encoder/attention/{k}": f"L_e · {_wrap(p)}" for k, (p, _) in attn.explain_parts().items()}
        out |= {f"encoder/ffn/{k}": f"L_e · {_wrap(p)}" for k, (p, _) in ffn.explain_parts().items()}
        out["encoder/norms/layer"] = f"L_e · n_norm · {_wrap(norm.explain_params('d'))}"
        out["encoder/norms/final"] = norm.explain_params("d") if norm.final else "0"
        return out

    def explain_flops(self, spec: Any, phase: str, passes: Any) -> dict[str, str]:
        """As encoder_terms: a prefill (and, × its passes, a training step) runs the stem, the encoder over B·S_e
        tokens with B·S_e² pairs, the cross K/V over B·S_e and the cross queries and output over B·S tokens with
        B·S·S_e pairs; a decode step the cross queries and output of B tokens over B·S_e pairs."""
        attn, ffn = spec.attention, spec.ffn
        decode = phase == "decode"

        def lead(component: str) -> list[str]:
            return [str(passes(component))] if phase == "train" else []

        out: dict[str, str] = {}
        if not decode:
            if self.mel_bins:
                out["encoder/conv1"] = " · ".join([*lead("encoder/conv1"), "2 · k_c · m_el · d · 2 · B · S_e"])
                out["encoder/conv2"] = " · ".join([*lead("encoder/conv2"), "2 · k_c · d · d · B · S_e"])
            for k, (_, w) in attn.explain_parts().items():
                if w is not None:
                    out[f"encoder/attention/{k}"] = " · ".join([*lead(f"encoder/attention/{k}"), "2 · L_e · B · S_e",
                                                                 _wrap(w)])
            for k, cost in attn.explain_pair_costs(False).items():
                out[f"encoder/attention/{k}"] = " · ".join([*lead(f"encoder/attention/{k}"), "L_e · B · S_e · S_e",
                                                             _wrap(cost)])
            for k, (_, w) in ffn.explain_parts().items():
                if w is not None:
                    out[f"encoder/ffn/{k}"] = " · ".join([*lead(f"encoder/ffn/{k}"), "2 · L_e · B · S_e", _wrap(w)])
        tokens = "B" if decode else "B · S"
        for k, (_, w) in attn.explain_parts().items():
            if w is not None and not (decode and k in ("k", "v")):
                rows = "B · S_e" if k in ("k", "v") else tokens
                out[f"cross_attention/{k}"] = " · ".join([*lead(f"cross_attention/{k}"), f"2 · L · {rows}", _wrap(w)])
        for k, cost in attn.explain_pair_costs(False).items():
            out[f"cross_attention/{k}"] = " · ".join([*lead(f"cross_attention/{k}"), f"L · {tokens} · S_e",
                                                      _wrap(cost)])
        return out

    def explain_kv(self, spec: Any, bits: int) -> dict[str, str]:
        """The cross cache: K and V of the S_e encoder positions in each decoder layer (gqa attention, check_spec),
        2 · L · H_kv · h · B · S_e · bytes (sub-byte: rounded up per layer, as cache_bytes)."""
        return {"cross": cached_bytes(("2", "L", "H_kv", "h"), ("2", "H_kv", "h"), "L", "S_e", bits)}

    def explain_activations(self, decoder: str) -> str:
        """The larger of the encoder's forward peak, the decoder's prefill peak with the encoder output held
        (a · B · S_e · d), and an audio stem's (its features and first convolution's output and GELU)."""
        encoder = "S_e · (8 + 2 · a · d_rot) + B · S_e · (2 · a · d + m_e)"
        stem = ", a · B · 2 · S_e · (m_el + 2 · d)" if self.mel_bins else ""
        return f"max({encoder}, {decoder} + a · B · S_e · d{stem})"

    def held_params(self, spec: Any) -> Parts:
        """The encoder (extra_params) and the decoder's embedding norm."""
        return self.extra_params(spec) | self.embedding_params(spec.d_model, spec.norm)

    def read_params(self, spec: Any, encode: bool) -> Parts:
        """Every forward: the decoder's embedding norm; a forward that encodes: the encoder but its position table
        (looked up per position, as the decoder's is)."""
        enc = {k: v for k, v in self.extra_params(spec).items() if k != "encoder/position"} if encode else {}
        return self.embedding_params(spec.d_model, spec.norm) | enc

    def time_kernels(self, spec: Any, encode: bool) -> dict[str, int]:
        """When encoding: per encoder layer each matmul, the core and the norms, its final norm, and the stem's two
        convolutions (the cross-attention's are each decoder layer's: layer_time_kernels)."""
        if not encode:
            return {}
        attn, ffn, d, L_e = spec.attention, spec.ffn, spec.d_model, self.encoder_layers
        out = {"encoder/proj": L_e * (len(attn.matmuls(d)) + spec.norm.per_layer) + spec.norm.final,
               "encoder/core": L_e, "encoder/ffn": L_e * len(ffn.matmuls(d))}
        return out | ({"encoder/stem": 2} if self.mel_bins else {})

    def time_note(self) -> str | None:
        return ("encoder-decoder: time to first token = the encoder over S_e tokens (its weights read once, "
                "S_e² pairs per layer) + the cross K/V of its output (written to the cross cache) + the decoder's "
                "prompt with cross-attention over S_e keys; each decode step reads the decoder's weights (but the "
                "cross K/V projections), its self cache and the fixed cross cache (cross_bytes_per_sequence × batch) "
                "and runs one query per sequence over S_e keys; docs/encoder-decoder.md#time")

    def check_timed(self, field: str, layout: Any) -> None:
        """latency and sweep are modelled on one GPU per replica (tp = pp = ep = 1; dp replicas)."""
        if layout.tp * layout.pp * layout.ep > 1:
            raise UserError("`tp`: an encoder-decoder is timed on one GPU per replica (its encoder is not split); "
                            "set tp, pp and ep to 1 (dp replicas are modelled)")

    def check_decoding(self, field: str) -> None:
        raise UserError(f"`{field}`: serving an encoder-decoder model (serve, plan, fit, compare) is not modelled "
                        "yet; `llmcalc latency` and `llmcalc sweep` time it")

    def check_modelled(self, what: str) -> None:
        raise UserError(f"`model`: {what} of an encoder-decoder model is not modelled yet; params, flops, kv, "
                        "inference memory, latency, sweep and explain are")

    def encoder_flops_note(self) -> str | None:
        return ("encoder-decoder: prefill = the encoder over S_e tokens (bidirectional, S_e² pairs per layer) + the "
                "cross-attention K/V of its output (once) + the decoder's S prompt tokens (causal self-attention "
                "under the attention convention, cross-attention over S_e keys: S·S_e pairs); a decode step: one "
                "token's self-attention over its cache and cross-attention over the S_e encoder keys; train 3× the "
                "forward with all logits; docs/encoder-decoder.md#flops")

    def params_note(self) -> str | None:
        return (f"encoder-decoder: {self.encoder_layers} encoder layers under encoder/, the decoder's layers with "
                "their cross-attention; the token embedding is shared by encoder, decoder (and a tied LM head)")

    def check_spec(self, spec: Any) -> None:
        if spec.mtp_modules:
            raise ValueError("mtp_modules: not modelled in an encoder-decoder; set mtp_modules: 0")
        if spec.attention.kind != "gqa" or spec.ffn.kind == "moe":
            raise ValueError("attention.kind: an encoder-decoder is modelled with gqa attention and a dense or gated "
                             "FFN")
