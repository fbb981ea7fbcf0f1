"""Bidirectional encoders (BERT, RoBERTa, ModernBERT) and encoder-decoders (T5, BART, Whisper) for the reference:
the `encoder` and `encoder-decoder` stacks of llmcalc/model/encoders.py, built from a spec in plain torch.

Shapes: B batch, S encoder positions (S_e), T new decoder tokens, L self-attention keys, d model width, H query
heads, H_kv key/value heads, h head dim, f FFN width, V vocabulary, n_b T5 buckets; Whisper: m mel bins, 2·S mel
frames.

An encoder layer attends bidirectionally: every query sees every key (a sliding layer, ModernBERT's local one: the
band |i − j| ≤ ⌊W/2⌋, as a mask on the full S × S product). A decoder layer of an encoder-decoder is a causal
self-attention (the reference decoder's, with its cache), a cross-attention whose keys and values are projected
from the encoder output once, at the prefill, and kept in the cache, and the FFN. Norms sit before each block
(pre-norm); BERT's and BART's post-norm places the same norms after it, which changes no parameter and no FLOP.
Values are random: the models are for costs and cache sizes, not for loading checkpoints.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from llmcalc.model.spec import ModelSpec
from llmcalc.reference.buckets import BucketAttention, relative_bucket
from llmcalc.reference.layers import MLP, GQAttention, Step, add, make_norm, materialise, rope_tables, sinusoidal
from llmcalc.reference.model import layer_shape


def _mlp(spec: ModelSpec) -> MLP:
    f = spec.ffn
    return MLP(spec.d_model, f.d_ff, gated=f.kind == "gated", activation=f.activation, bias=f.bias)


def _table_rows(spec: ModelSpec, positions: int) -> int:
    """Rows of a learned position table covering `positions` positions: with its offset rows (BART's 2)."""
    return spec.positions.params(positions, 1, spec.attention)


def _check(spec: ModelSpec) -> None:
    if spec.norm.per_layer != 2 or spec.attention.kind != "gqa" or spec.ffn.routed_experts:
        raise ValueError("the reference encoder builds gqa attention, a dense or gated FFN and two norms per layer")
    if spec.positions.kind not in ("learned", "sinusoidal", "rope", "t5_buckets", "none"):
        raise ValueError(f"positions.kind {spec.positions.kind}: the reference encoder takes learned, sinusoidal, "
                         "rope, t5_buckets or none")


class EncoderAttention(GQAttention):
    """Bidirectional multi-head attention, no cache. A sliding layer masks keys beyond ⌊W/2⌋ either side; T5 adds
    its bucketed bias (the bidirectional buckets, from the stack's table in `step.buckets`). The first layer of a T5
    stack holds the table, `relative_attention_bias` [n_b, H]."""

    def __init__(self, spec: ModelSpec, window: int | None, table: bool = False):
        super().__init__(spec, window)
        p = spec.positions
        self.buckets = (p.num_buckets, p.max_distance) if p.kind == "t5_buckets" else None
        self.relative_attention_bias = nn.Embedding(p.num_buckets, spec.attention.heads) if table else None

    def forward(self, x: Tensor, step: Step) -> Tensor:
        B, S, _ = x.shape
        q, k, v = self.qkv(x, step)  # [B, S, H, h], [B, S, H_kv, h] ×2
        mask = None
        if self.window is not None or self.buckets:
            pos = torch.arange(S, device=x.device)
            offset = pos[None, :] - pos[:, None]  # [S, S]: key position − query position
            if self.window is not None:  # [S, S]: 0 inside the band, −∞ outside
                mask = torch.zeros(S, S, dtype=q.dtype, device=x.device)
                mask = mask.masked_fill_(offset.abs() > self.window // 2, -math.inf)
            if self.buckets:
                bucket = relative_bucket(offset, *self.buckets, bidirectional=True)  # [S, S]
                bias = F.embedding(bucket, step.buckets.to(q.dtype)).permute(2, 0, 1)[None]  # [1, H, S, S]: a lookup
                mask = bias if mask is None else bias + mask
        # every query over every key: [B, H, S, h] @ [B, H_kv, h, S] → [B, H, S, S] @ [B, H_kv, S, h] → [B, H, S, h]
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                             attn_mask=mask, scale=self.head_dim**-0.5, enable_gqa=True)
        return self.o(out.transpose(1, 2).reshape(B, S, -1))  # [B, S, H·h] @ [H·h, d] → [B, S, d]


class EncoderLayer(nn.Module):
    """x + attn(n₀(x)), then x + ffn(n₁(x)). `attention_norm` false: no n₀, the layer reads its input as it comes
    (ModernBERT's layer 0, after the embedding norm)."""

    def __init__(self, spec: ModelSpec, window: int | None, table: bool = False, attention_norm: bool = True):
        super().__init__()
        self.attn = EncoderAttention(spec, window, table)
        self.ffn = _mlp(spec)
        self.norms = nn.ModuleList(make_norm(spec.norm, spec.d_model) for _ in range(1 + attention_norm))

    def forward(self, x: Tensor, step: Step) -> Tensor:
        h = self.norms[0](x) if len(self.norms) == 2 else x
        x = add(x, self.attn(h, step))
        return add(x, self.ffn(self.norms[-1](x)))


class EncoderStack(nn.Module):
    """Positions, an optional norm over the summed embeddings, `layers` bidirectional layers, an optional final
    norm. The token embedding is the caller's (shared with a decoder). `rows`: the learned position table's rows;
    `windows`: each layer's window (None: full)."""

    def __init__(self, spec: ModelSpec, layers: int, rows: int, windows: list[int | None], embedding_norm: bool,
                 first_attention_norm: bool = True):
        super().__init__()
        d, kind = spec.d_model, spec.positions.kind
        self.spec, self.kind = spec, kind
        self.pos_embed = nn.Embedding(rows, d) if kind == "learned" else None  # [rows, d]
        self.embed_norm = make_norm(spec.norm, d) if embedding_norm else None
        self.layers = nn.ModuleList(EncoderLayer(spec, windows[i], table=i == 0 and kind == "t5_buckets",
                                                 attention_norm=first_attention_norm or i > 0) for i in range(layers))
        self.final_norm = make_norm(spec.norm, d) if spec.norm.final else None

    def forward(self, x: Tensor) -> Tensor:
        """x [B, S, d], the embedded input, → the encoder output [B, S, d]."""
        return self.run(self.embed_positions(x))

    def embed_positions(self, x: Tensor) -> Tensor:
        """x [B, S, d] with the positions added and the embedding norm applied: the residual stream."""
        pos = torch.arange(x.shape[1], device=x.device)
        if self.pos_embed is not None:
            x = x + self.pos_embed(pos + self.spec.positions.offset)  # a lookup and an add, no FLOPs
        elif self.kind == "sinusoidal":
            x = x + sinusoidal(pos, self.spec.d_model).to(x.dtype)
        return x if self.embed_norm is None else self.embed_norm(x)

    def run(self, x: Tensor) -> Tensor:
        """The layers and the final norm over the residual stream x [B, S, d]."""
        pos = torch.arange(x.shape[1], device=x.device)
        a = self.spec.attention
        step = Step(0, rope_tables(pos, a.head_dim, x.dtype) if self.kind == "rope" else None, None, False,
                    buckets=self.layers[0].attn.relative_attention_bias.weight if self.kind == "t5_buckets" else None)
        for layer in self.layers:
            x = layer(x, step)
        return x if self.final_norm is None else self.final_norm(x)


class Encoder(nn.Module):
    """The bare encoder of an `encoder` stack (BertModel, RobertaModel, ModernBertModel): token embedding, token-type
    table, the EncoderStack, and BERT's pooler (d → d with tanh on each sequence's first token). No LM head, no
    cache: forward is the whole workload."""

    def __init__(self, spec: ModelSpec, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu"):
        super().__init__()
        _check(spec)
        st, d = spec.stack, spec.d_model
        with torch.device("meta"):
            self.embed = nn.Embedding(spec.vocab_size, d)  # [V, d]
            self.token_type = nn.Embedding(st.token_types, d) if st.token_types else None  # [T, d]
            windows = [layer_shape(spec, i)[0] for i in range(spec.n_layers)]
            self.stack = EncoderStack(spec, spec.n_layers, _table_rows(spec, spec.max_seq_len), windows,
                                      st.embedding_norm, st.first_attention_norm)
            self.pooler = nn.Linear(d, d) if st.pooler else None
        materialise(self, dtype, device)

    def new_cache(self, batch: int, max_tokens: int, dtype: torch.dtype | None = None) -> list:
        return []  # an encoder keeps nothing between calls

    def use_kernels(self, kernels: str) -> Encoder:
        """One set of kernels: the counted ones (SDPA, every matmul an nn.Linear)."""
        return self

    def forward(self, tokens: Tensor, cache=None, start: int = 0, logits: str = "last", mla_decode: str = "") -> Tensor:
        """tokens [B, S] → [B, S, d]: the pooled first token (with a pooler) and the other positions' hidden states,
        so a loss on the output reaches every weight."""
        x = self.embed(tokens)  # [B, S, d]: a lookup
        if self.token_type is not None:
            x = x + self.token_type(torch.zeros_like(tokens))  # segment 0 everywhere
        x = self.stack(x)
        if self.pooler is None:
            return x
        pooled = torch.tanh(self.pooler(x[:, 0]))  # [B, d] @ [d, d] → [B, d]
        return torch.cat([pooled[:, None], x[:, 1:]], 1)


class CrossAttention(nn.Module):
    """q from the decoder, k and v from the encoder output [B, S, d]: projected once, at the prefill, into the
    cache (K, V [B, H_kv, S, h]), read at every later step. No mask and no position bias: every decoder token sees
    every encoder position."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        a, d = spec.attention, spec.d_model
        self.head_dim, self.kv_heads = a.head_dim, a.kv_heads
        self.q = nn.Linear(d, a.q_width, bias=a.qkv_bias)
        self.k = nn.Linear(d, a.kv_width, bias=a.qkv_bias and a.key_bias)
        self.v = nn.Linear(d, a.kv_width, bias=a.qkv_bias)
        self.o = nn.Linear(a.q_width, d, bias=a.o_bias)

    def forward(self, x: Tensor, kv: tuple[Tensor, Tensor] | None, memory: Tensor | None) -> Tensor:
        B, T, _ = x.shape
        if memory is not None:
            S = memory.shape[1]
            # [B, S, d] @ [d, H_kv·h] → [B, S, H_kv·h] → [B, H_kv, S, h], for k and for v
            k = self.k(memory).view(B, S, self.kv_heads, -1).transpose(1, 2)
            v = self.v(memory).view(B, S, self.kv_heads, -1).transpose(1, 2)
            if kv is not None:
                kv[0].copy_(k), kv[1].copy_(v)  # the cross cache, written once
        else:
            k, v = kv  # [B, H_kv, S, h] each, from the prefill
        q = self.q(x).view(B, T, -1, self.head_dim).transpose(1, 2)  # [B, T, d] @ [d, H·h] → [B, H, T, h]
        # [B, H, T, h] @ [B, H_kv, h, S] → [B, H, T, S] @ [B, H_kv, S, h] → [B, H, T, h]
        out = F.scaled_dot_product_attention(q, k, v, scale=self.head_dim**-0.5, enable_gqa=True)
        return self.o(out.transpose(1, 2).reshape(B, T, -1))  # [B, T, H·h] @ [H·h, d] → [B, T, d]


class CrossLayer(nn.Module):
    """A decoder layer of an encoder-decoder: x + self(n₀(x)), x + cross(n_c(x), encoder output), x + ffn(n₁(x)).
    The self-attention is the reference decoder's (T5's: with its causal bucketed bias; the first layer holds the
    decoder's table)."""

    def __init__(self, spec: ModelSpec, first: bool):
        super().__init__()
        t5 = spec.positions.kind == "t5_buckets"
        self.attn = BucketAttention(spec, None, table=first) if t5 else GQAttention(spec, None)
        self.cross = CrossAttention(spec)
        self.ffn = _mlp(spec)
        self.norms = nn.ModuleList(make_norm(spec.norm, spec.d_model) for _ in range(2))
        self.cross_norm = make_norm(spec.norm, spec.d_model)

    def forward(self, x: Tensor, kv: tuple[Tensor, ...] | None, memory: Tensor | None, step: Step) -> Tensor:
        x = add(x, self.attn(self.norms[0](x), kv[:2] if kv else None, step))
        x = add(x, self.cross(self.cross_norm(x), kv[2:] if kv else None, memory))
        return add(x, self.ffn(self.norms[1](x)))


class EncoderDecoder(nn.Module):
    """An `encoder-decoder` stack (T5ForConditionalGeneration, BartForConditionalGeneration,
    WhisperForConditionalGeneration): the token embedding shared by both stacks (and a tied head), the encoder
    (Whisper: fed by its conv stem, Conv1d(m → d, k 3) and Conv1d(d → d, k 3, stride 2), GELU after each), the
    decoder's positions, its layers (CrossLayer), final norm and LM head.

    Cache per decoder layer: self K, V [B, H_kv, n, h] and cross K, V [B, H_kv, S, h]."""

    def __init__(self, spec: ModelSpec, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
                 encoder_seq: int | None = None):
        super().__init__()
        _check(spec)
        st, d, V = spec.stack, spec.d_model, spec.vocab_size
        self.spec = spec
        self.encoder_seq = encoder_seq or st.encoder_frames
        """S, the encoder positions a prefill encodes and the cross cache holds (Whisper: fixed by its config)."""
        if self.encoder_seq is None:
            raise ValueError("encoder_seq: give the encoder's positions per sequence")
        with torch.device("meta"):
            self.embed = nn.Embedding(V, d)  # [V, d], shared
            if st.mel_bins:
                self.conv1 = nn.Conv1d(st.mel_bins, d, 3, padding=1)  # [d, m, 3]
                self.conv2 = nn.Conv1d(d, d, 3, stride=2, padding=1)  # [d, d, 3]
            rows = _table_rows(spec, st.encoder_frames or spec.max_seq_len)
            self.encoder = EncoderStack(spec, st.encoder_layers, rows, [None] * st.encoder_layers, st.embedding_norm)
            learned = spec.positions.kind == "learned"
            self.pos_embed = nn.Embedding(_table_rows(spec, spec.max_seq_len), d) if learned else None
            self.embed_norm = make_norm(spec.norm, d) if st.embedding_norm else None
            self.layers = nn.ModuleList(CrossLayer(spec, i == 0) for i in range(spec.n_layers))
            self.final_norm = make_norm(spec.norm, d) if spec.norm.final else None
            self.lm_head = None if spec.tie_embeddings else nn.Linear(d, V, bias=spec.lm_head_bias)
        materialise(self, dtype, device)

    def use_kernels(self, kernels: str) -> EncoderDecoder:
        """One set of kernels: the counted ones (SDPA, every matmul an nn.Linear or a conv)."""
        return self

    def source(self, batch: int) -> Tensor:
        """A zero encoder input: S token ids [B, S], or Whisper's mel features [B, m, 2·S]."""
        w, S = self.embed.weight, self.encoder_seq
        m = self.spec.stack.mel_bins
        if m:
            return torch.zeros(batch, m, 2 * S, dtype=w.dtype, device=w.device)
        return torch.zeros(batch, S, dtype=torch.long, device=w.device)

    def encode(self, source: Tensor) -> Tensor:
        """The encoder output [B, S, d] of token ids [B, S] or mel features [B, m, 2·S]."""
        if self.spec.stack.mel_bins:
            x = F.gelu(self.conv1(source))  # [B, m, 2S] → [B, d, 2S]: 2·3·m·d per output frame
            del source  # the features are not read past the first convolution (freed if the caller holds none)
            x = F.gelu(self.conv2(x)).transpose(1, 2)  # [B, d, 2S] → [B, d, S] → [B, S, d]: 2·3·d² per frame
        else:
            x = self.embed(source)  # [B, S, d]: a lookup
        x = self.encoder.embed_positions(x)  # the residual stream; the stem's output is freed here
        return self.encoder.run(x)

    def new_cache(self, batch: int, max_tokens: int, dtype: torch.dtype | None = None) -> list[tuple[Tensor, ...]]:
        """Per decoder layer: self K, V for max_tokens positions and cross K, V for the encoder's S, zeroed."""
        w, a = self.embed.weight, self.spec.attention
        S = self.encoder_seq
        shapes = [(batch, a.kv_heads, max_tokens, a.head_dim)] * 2 + [(batch, a.kv_heads, S, a.head_dim)] * 2
        return [tuple(torch.zeros(s, dtype=dtype or w.dtype, device=w.device) for s in shapes) for _ in self.layers]

    def forward(self, tokens: Tensor, cache: list | None = None, start: int = 0, logits: str = "last",
                mla_decode: str = "", source: Tensor | None = None) -> Tensor:
        """Logits [B, 1, V] ("last") or [B, T, V] ("all") for decoder tokens [B, T] at positions start … . At
        start 0 the encoder runs first over `source` (zeros of encoder_seq positions when not given) and
        each layer's cross K, V are projected from its output (into the cache when one is given); a later step
        reads them from the cache."""
        B, T = tokens.shape
        memory = None
        if start == 0:
            memory = self.encode(self.source(B) if source is None else source)
        elif cache is None:
            raise ValueError("a step after the prefill (start > 0) reads the cross-attention K and V from a cache")
        spec = self.spec
        pos = torch.arange(start, start + T, device=tokens.device)
        x = self.embed(tokens)  # [B, T, d]: a lookup
        if self.pos_embed is not None:
            x = x + self.pos_embed(pos + spec.positions.offset)
        elif spec.positions.kind == "sinusoidal":
            x = x + sinusoidal(pos, spec.d_model).to(x.dtype)
        if self.embed_norm is not None:
            x = self.embed_norm(x)
        t5 = spec.positions.kind == "t5_buckets"
        step = Step(start, rope_tables(pos, spec.attention.head_dim, x.dtype) if spec.positions.kind == "rope"
                    else None, None, False, buckets=self.layers[0].attn.relative_attention_bias.weight if t5 else None)
        for layer, kv in zip(self.layers, cache or [None] * len(self.layers), strict=True):
            x = layer(x, kv, memory, step)
        if logits == "last":
            x = x[:, -1:]
        if self.final_norm is not None:
            x = self.final_norm(x)
        if self.lm_head is None:
            return F.linear(x, self.embed.weight)  # [B, T', d] @ [d, V] → [B, T', V]
        return self.lm_head(x)  # [B, T', d] @ [d, V] → [B, T', V]
