"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017) in one file, top to bottom.

Plain PyTorch and nothing else: no options beyond the paper's (post-LN, ReLU, sinusoidal positions, one
embedding matrix shared by the source, the target and the output layer and scaled by sqrt(d_model), dropout).
The rest of the package builds the same model from ``nn/`` and ``models/`` with every later choice on top;
``tests/test_paper.py`` loads their weights into this file and gets the same outputs.

Letters used in every shape comment (the same on every page of the walkthrough)::

    B  batch size         S  source length (keys)     T  target length (queries)
    C  d_model            H  number of heads          D  head size = C / H  (d_k in the paper)
    V  vocabulary size    N  number of layers         d_ff  the feed-forward width

Masks are boolean and ``True`` means "may attend", the polarity of ``F.scaled_dot_product_attention``.
Padding goes at the end of a row (right padding): positions are counted from the first column, so padding in
front would move every real token to another position.

The order is the order in which data flows through Figure 1, not the order of the paper's sections (§3.1 to
§3.5): the embeddings (§3.4) and positions (§3.5) a token meets first, then attention (§3.2.1) and its masks
(§3.2.3's causal mask, and the padding mask that batches need), multi-head attention (§3.2.2), the feed-forward
network (§3.3), Add & Norm (§3.1), the encoder and decoder layers and stacks, Figure 1's encoder-decoder and
``make_model``; then two small variations on the same blocks, a decoder-only language model (GPT) and an
encoder-only classifier. ``paper_train.py``, beside
this file, trains ``make_model`` on a copy task with the paper's recipe: ``python paper_train.py``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# ---------------------------------------------------------------------------- §3.4 embeddings


class Embeddings(nn.Module):
    """Token ids -> vectors, multiplied by sqrt(d_model) (§3.4): ``(B, T) -> (B, T, C)``.

    ``table`` is one ``(V, C)`` matrix; ``make_model`` shares it between the source embedding, the
    target embedding and the output layer ("the same weight matrix between the two embedding layers and the
    pre-softmax linear transformation").
    """

    def __init__(self, vocab_size: int, d_model: int) -> None:
        super().__init__()
        self.table = nn.Embedding(vocab_size, d_model)  # (V, C)
        self.d_model = d_model

    def forward(self, ids: Tensor) -> Tensor:
        return self.table(ids) * math.sqrt(self.d_model)  # (B, T, C)


# ---------------------------------------------------------------------------- §3.5 positional encoding


def sinusoidal_positions(max_len: int, d_model: int) -> Tensor:
    """The ``(max_len, C)`` table of §3.5:

        PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
        PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))
    """
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (C/2,): 0, 2, 4, ...
    angles = pos / 10000 ** (two_i / d_model)  # (max_len, C/2)
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles)  # even dimensions
    table[:, 1::2] = torch.cos(angles)  # odd dimensions
    return table.float()


class PositionalEncoding(nn.Module):
    """Adds the sinusoids to the embeddings, then dropout (§5.4): ``(B, T, C) -> (B, T, C)``."""

    def __init__(self, d_model: int, dropout: float, max_len: int = 5000) -> None:
        super().__init__()
        self.register_buffer("pe", sinusoidal_positions(max_len, d_model), persistent=False)  # fixed, not learned
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(x + self.pe[: x.size(1)])  # row t of the table goes to position t, in every sentence


# ---------------------------------------------------------------------------- §3.2.1 scaled dot-product attention


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V                                    (equation 1)

    ``q (B, H, T, D)``, ``k, v (B, H, S, D)``, ``mask`` broadcastable to ``(B, H, T, S)``, True = may
    attend. Returns the output ``(B, H, T, D)`` and the weights ``(B, H, T, S)``, each row summing to 1.
    Every query must be allowed at least one key (a row of -inf alone would be 0/0 = NaN).
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, T, S): every query against every key
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # exp(-inf) = 0: a masked key gets no weight
    weights = scores.softmax(dim=-1)  # (B, H, T, S)
    return weights @ v, weights  # (B, H, T, D): a weighted average of the values


# ----------------------------------------------------------------- the masks: §3.2.3's causal one, and padding


def padding_mask(ids: Tensor, pad_id: int) -> Tensor:
    """``(B, S)`` ids -> ``(B, 1, 1, S)``: no query, in any head, may attend to a padding key."""
    return (ids != pad_id)[:, None, None, :]


def causal_mask(length: int, device: torch.device | None = None) -> Tensor:
    """``(T, T)``, lower-triangular: position i may attend to positions 0 .. i, never to a later one."""
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()


# ---------------------------------------------------------------------------- §3.2.2 multi-head attention


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,  head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

    The H heads' ``(C, D)`` matrices W_i^Q sit side by side in one ``(C, C)`` layer ``w_q`` (and so on
    for K and V): one matrix product projects every head at once, and a reshape separates them.
    Self-attention passes the same ``x`` as query, key and value; cross-attention passes the decoder's
    ``x`` as query and the encoder's output as key and value.
    """

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        assert d_model % n_heads == 0, "d_model must be a multiple of n_heads"
        self.n_heads, self.head_dim = n_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model)  # W^Q of all heads
        self.w_k = nn.Linear(d_model, d_model)  # W^K
        self.w_v = nn.Linear(d_model, d_model)  # W^V
        self.w_o = nn.Linear(d_model, d_model)  # W^O

    def split_heads(self, x: Tensor) -> Tensor:
        B, L, C = x.shape
        return x.view(B, L, self.n_heads, self.head_dim).transpose(1, 2)  # (B, L, C) -> (B, H, L, D)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None) -> Tensor:
        """``query (B, T, C)``, ``key, value (B, S, C)``, ``mask`` -> ``(B, T, C)``."""
        q = self.split_heads(self.w_q(query))  # (B, H, T, D)
        k = self.split_heads(self.w_k(key))  # (B, H, S, D)
        v = self.split_heads(self.w_v(value))  # (B, H, S, D)
        out, _ = attention(q, k, v, mask)  # (B, H, T, D): the H heads side by side
        B, H, T, D = out.shape
        out = out.transpose(1, 2).reshape(B, T, H * D)  # Concat(head_1, ..., head_h): (B, T, C)
        return self.w_o(out)  # (B, T, C)


# ---------------------------------------------------------------------------- §3.3 position-wise feed-forward


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, at every position alike (equation 2): ``(B, T, C) -> (B, T, C)``."""

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)  # (C) -> (d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)  # (d_ff) -> (C)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_2(F.relu(self.w_1(x)))  # (B, T, d_ff) in between


# ---------------------------------------------------------------------------- §3.1 residual + LayerNorm


class AddAndNorm(nn.Module):
    """Figure 1's "Add & Norm": LayerNorm(x + Dropout(Sublayer(x))) (§3.1, dropout §5.4): ``(B, T, C)``.

    The paper normalises after the sum ("post-LN"); ``y`` is the sub-layer's output.
    """

    def __init__(self, d_model: int, dropout: float) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)  # (x - mean) / sqrt(var + eps) * gain + bias, over C
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        return self.norm(x + self.dropout(y))


# ---------------------------------------------------------------------------- §3.1 encoder and decoder layers


class EncoderLayer(nn.Module):
    """Self-attention, then feed-forward, each wrapped in Add & Norm: ``(B, S, C) -> (B, S, C)``."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads)
        self.add_norm_1 = AddAndNorm(d_model, dropout)
        self.ffn = FeedForward(d_model, d_ff)
        self.add_norm_2 = AddAndNorm(d_model, dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        x = self.add_norm_1(x, self.self_attn(x, x, x, mask))  # every position looks at every (real) position
        return self.add_norm_2(x, self.ffn(x))


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder's output ``memory``, then feed-forward,
    each wrapped in Add & Norm: ``(B, T, C) -> (B, T, C)``."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads)
        self.add_norm_1 = AddAndNorm(d_model, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads)
        self.add_norm_2 = AddAndNorm(d_model, dropout)
        self.ffn = FeedForward(d_model, d_ff)
        self.add_norm_3 = AddAndNorm(d_model, dropout)

    def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor, tgt_mask: Tensor) -> Tensor:
        """``memory (B, S, C)``; ``tgt_mask`` to ``(B, 1, T, T)`` (causal), ``src_mask`` to ``(B, 1, 1, S)``."""
        x = self.add_norm_1(x, self.self_attn(x, x, x, tgt_mask))  # earlier target positions only
        x = self.add_norm_2(x, self.cross_attn(x, memory, memory, src_mask))  # queries: target; keys, values: source
        return self.add_norm_3(x, self.ffn(x))


class Encoder(nn.Module):
    """N encoder layers, one after the other: ``(B, S, C) -> (B, S, C)``."""

    def __init__(self, layers: list[EncoderLayer]) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x, mask)
        return x


class Decoder(nn.Module):
    """N decoder layers, each reading the same encoder output: ``(B, T, C) -> (B, T, C)``."""

    def __init__(self, layers: list[DecoderLayer]) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor, tgt_mask: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return x


# ---------------------------------------------------------------------------- Figure 1: the encoder-decoder


class Transformer(nn.Module):
    """Figure 1. ``forward(src (B, S), tgt (B, T)) -> logits (B, T, V)``. ``tgt`` is the target shifted right,
    ``<bos> y_1 .. y_(T-1)``: position t (counted from 0, ``<bos>`` at 0) has read ``<bos> y_1 .. y_t`` and its
    logits predict ``y_(t+1)``.

    ``encode`` and ``decode`` are the two halves, for decoding one token at a time.
    """

    def __init__(self, embed: Embeddings, positions: PositionalEncoding, encoder: Encoder, decoder: Decoder,
                 pad_id: int = 0) -> None:
        super().__init__()
        self.embed, self.positions = embed, positions  # shared by source and target
        self.encoder, self.decoder = encoder, decoder
        self.pad_id = pad_id

    def encode(self, src: Tensor) -> Tensor:
        """``src (B, S)`` -> the encoder's output ``memory (B, S, C)``."""
        return self.encoder(self.positions(self.embed(src)), padding_mask(src, self.pad_id))

    def decode(self, tgt: Tensor, memory: Tensor, src: Tensor) -> Tensor:
        """``tgt (B, T)`` the target so far, ``memory (B, S, C)`` and its ``src`` -> logits ``(B, T, V)``."""
        tgt_mask = padding_mask(tgt, self.pad_id) & causal_mask(tgt.size(1), tgt.device)  # (B, 1, T, T)
        x = self.decoder(self.positions(self.embed(tgt)), memory, padding_mask(src, self.pad_id), tgt_mask)
        return x @ self.embed.table.weight.T  # (B, T, C) @ (C, V): the output layer is the embedding matrix

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        return self.decode(tgt, self.encode(src), src)


def make_model(vocab_size: int, n_layers: int = 6, d_model: int = 512, d_ff: int = 2048, n_heads: int = 8,
               dropout: float = 0.1, max_len: int = 5000, pad_id: int = 0) -> Transformer:
    """The whole model wired in one place. The defaults are the base model of Table 3: with a shared
    vocabulary of 37,000 tokens (the paper's "about 37000"), ``make_model(37000)`` has 63,082,496 parameters,
    where Table 3 lists 65M; exercise 8.1 of the walkthrough counts them."""
    model = Transformer(
        Embeddings(vocab_size, d_model),
        PositionalEncoding(d_model, dropout, max_len),
        Encoder([EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)]),
        Decoder([DecoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)]),
        pad_id,
    )
    init_weights(model)
    return model


def init_weights(model: nn.Module) -> None:
    """The paper states no initialisation. Matrices Xavier-uniform (as ``torch.nn.Transformer``), every bias 0
    (``torch.nn.Transformer`` zeroes only the attention biases and leaves the feed-forward ones at
    ``nn.Linear``'s default); the embedding N(0, 1/C), so that x sqrt(C) makes it unit-variance."""
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)
            nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=module.embedding_dim ** -0.5)


# ---------------------------------------------------------------------------- variation 1: decoder-only (GPT)


class GPT(nn.Module):
    """A language model: the encoder's layers under the causal mask, so each position sees itself and the
    positions before it (the decoder without cross-attention, as Radford et al. 2018). ``(B, T) -> logits
    (B, T, V)``: position t predicts token t + 1. Pad at the end only: a row that starts with padding has a
    first query that may attend to no key at all: its NaN reaches every position from the second layer on."""

    def __init__(self, vocab_size: int, n_layers: int = 6, d_model: int = 512, d_ff: int = 2048,
                 n_heads: int = 8, dropout: float = 0.1, max_len: int = 5000, pad_id: int = 0) -> None:
        super().__init__()
        self.embed = Embeddings(vocab_size, d_model)
        self.positions = PositionalEncoding(d_model, dropout, max_len)
        self.blocks = Encoder([EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)])
        self.pad_id = pad_id
        init_weights(self)

    def forward(self, ids: Tensor) -> Tensor:
        mask = padding_mask(ids, self.pad_id) & causal_mask(ids.size(1), ids.device)  # (B, 1, T, T)
        x = self.blocks(self.positions(self.embed(ids)), mask)  # (B, T, C)
        return x @ self.embed.table.weight.T  # (B, T, V), tied to the embedding


# ---------------------------------------------------------------------------- variation 2: encoder-only classifier


class Classifier(nn.Module):
    """An encoder-only sentence classifier: the encoder, the mean of its outputs over the real tokens, one linear
    layer. ``(B, S) -> class logits (B, K)`` for K classes. Pad at the end only: padding in front moves the
    real tokens to later positions, which changes the logits."""

    def __init__(self, vocab_size: int, n_classes: int, n_layers: int = 6, d_model: int = 512, d_ff: int = 2048,
                 n_heads: int = 8, dropout: float = 0.1, max_len: int = 5000, pad_id: int = 0) -> None:
        super().__init__()
        self.embed = Embeddings(vocab_size, d_model)
        self.positions = PositionalEncoding(d_model, dropout, max_len)
        self.encoder = Encoder([EncoderLayer(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)])
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(d_model, n_classes)  # (C) -> (K)
        self.pad_id = pad_id
        init_weights(self)

    def forward(self, ids: Tensor) -> Tensor:
        mask = padding_mask(ids, self.pad_id)  # (B, 1, 1, S)
        x = self.encoder(self.positions(self.embed(ids)), mask)  # (B, S, C)
        real = (ids != self.pad_id).unsqueeze(-1).float()  # (B, S, 1): 1 for a real token
        pooled = (x * real).sum(1) / real.sum(1).clamp(min=1)  # (B, C): the mean over real tokens
        return self.head(self.dropout(pooled))  # (B, K)
