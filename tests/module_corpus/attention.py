"""Transformer pieces: positional encodings built with numpy or math, attention with a mask,
feed-forward blocks whose forward a base class defines."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

NEG_INF = -1e4
MAX_LEN = 64


def sinusoid_table(n_position, d_hid):
    def angle(pos):
        return [pos / np.power(10000, 2 * (j // 2) / d_hid) for j in range(d_hid)]

    table = np.array([angle(p) for p in range(n_position)])
    table[:, 0::2] = np.sin(table[:, 0::2])
    table[:, 1::2] = np.cos(table[:, 1::2])
    return torch.FloatTensor(table).unsqueeze(0)


def gelu(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * torch.pow(x, 3))))


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=MAX_LEN):
        super(PositionalEncoding, self).__init__()
        self.dropout = nn.Dropout(p=dropout)
        self.register_buffer("pe", sinusoid_table(max_len, d_model))

    def forward(self, x):
        x = x + self.pe[:, : x.size(1)]
        return self.dropout(x)


class ScaledDotProductAttention(nn.Module):
    def __init__(self, temperature, attn_dropout=0.1):
        super().__init__()
        self.temperature = temperature
        self.dropout = nn.Dropout(attn_dropout)

    def forward(self, q, k, v, mask=None):
        attn = torch.matmul(q / self.temperature, k.transpose(2, 3))
        if mask is not None:
            attn = attn.masked_fill(mask == 0, NEG_INF)
        attn = self.dropout(F.softmax(attn, dim=-1))
        return torch.matmul(attn, v), attn


class MultiHeadAttention(nn.Module):
    def __init__(self, n_head, d_model, d_k, d_v, dropout=0.1):
        super().__init__()
        self.n_head, self.d_k, self.d_v = n_head, d_k, d_v
        self.w_qs = nn.Linear(d_model, n_head * d_k, bias=False)
        self.w_ks = nn.Linear(d_model, n_head * d_k, bias=False)
        self.w_vs = nn.Linear(d_model, n_head * d_v, bias=False)
        self.fc = nn.Linear(n_head * d_v, d_model, bias=False)
        self.attention = ScaledDotProductAttention(temperature=d_k ** 0.5)
        self.dropout = nn.Dropout(dropout)
        self.layer_norm = nn.LayerNorm(d_model, eps=1e-6)

    def forward(self, q, k, v, mask=None):
        d_k, d_v, n_head = self.d_k, self.d_v, self.n_head
        sz_b, len_q, len_k, len_v = q.size(0), q.size(1), k.size(1), v.size(1)
        residual = q
        q = self.w_qs(q).view(sz_b, len_q, n_head, d_k)
        k = self.w_ks(k).view(sz_b, len_k, n_head, d_k)
        v = self.w_vs(v).view(sz_b, len_v, n_head, d_v)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if mask is not None:
            mask = mask.unsqueeze(1)
        q, attn = self.attention(q, k, v, mask=mask)
        q = q.transpose(1, 2).contiguous().view(sz_b, len_q, -1)
        q = self.dropout(self.fc(q))
        q += residual
        return self.layer_norm(q), attn


class FeedForwardBase(nn.Module):
    """A base class whose forward its subclasses inherit; they choose the activation."""

    def __init__(self, d_model, d_ff):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.norm = nn.LayerNorm(d_model)

    def activation(self, x):
        return F.relu(x)

    def forward(self, x):
        return self.norm(x + self.w_2(self.activation(self.w_1(x))))


class GeluFeedForward(FeedForwardBase):
    def activation(self, x):
        return gelu(x)


class PlainFeedForward(FeedForwardBase):
    pass


class EncoderLayer(nn.Module):
    def __init__(self, d_model, d_inner, n_head, d_k, d_v):
        super(EncoderLayer, self).__init__()
        self.slf_attn = MultiHeadAttention(n_head, d_model, d_k, d_v)
        self.pos_ffn = GeluFeedForward(d_model, d_inner)

    def forward(self, enc_input, slf_attn_mask=None, return_attn=False):
        enc_output, enc_slf_attn = self.slf_attn(enc_input, enc_input, enc_input, mask=slf_attn_mask)
        enc_output = self.pos_ffn(enc_output)
        if return_attn:
            return enc_output, enc_slf_attn
        return enc_output


class Encoder(nn.Module):
    def __init__(self, d_model=16, n_layers=2):
        super().__init__()
        self.position_enc = PositionalEncoding(d_model)
        self.layer_stack = nn.ModuleList([EncoderLayer(d_model, 32, 2, 8, 8) for _ in range(n_layers)])
        self.layer_norm = nn.LayerNorm(d_model, eps=1e-6)

    def forward(self, src_seq):
        enc_output = self.layer_norm(self.position_enc(src_seq))
        for enc_layer in self.layer_stack:
            enc_output = enc_layer(enc_output)
        return enc_output


class SelfAttention1d(nn.Module):
    """Attention written with einsum and a causal mask buffer, scale from math."""

    def __init__(self, dim, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("causal", torch.tril(torch.ones(MAX_LEN, MAX_LEN)).view(1, 1, MAX_LEN, MAX_LEN))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.causal[:, :, :t, :t] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class TokenClassifier(nn.Module):
    def __init__(self, vocab=50, dim=16, classes=3):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, padding_idx=0)
        self.encoder = Encoder(dim, 1)
        self.head = nn.Linear(dim, classes)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens) * math.sqrt(self.embed.embedding_dim)))


def _seq(d=16, t=6, n=2):
    return torch.randn(n, t, d)


CASES = [
    ("PositionalEncoding", lambda: (PositionalEncoding(16).eval(), (_seq(),))),
    ("ScaledDotProductAttention", lambda: (ScaledDotProductAttention(2.0).eval(),
                                           (torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 4)))),
    ("MultiHeadAttention", lambda: (MultiHeadAttention(2, 16, 8, 8).eval(), (_seq(), _seq(), _seq()))),
    ("GeluFeedForward", lambda: (GeluFeedForward(16, 32).eval(), (_seq(),))),
    ("PlainFeedForward", lambda: (PlainFeedForward(16, 32).eval(), (_seq(),))),
    ("EncoderLayer", lambda: (EncoderLayer(16, 32, 2, 8, 8).eval(), (_seq(),))),
    ("Encoder", lambda: (Encoder().eval(), (_seq(),))),
    ("SelfAttention1d", lambda: (SelfAttention1d(16).eval(), (_seq(),))),
    ("TokenClassifier", lambda: (TokenClassifier().eval(), (torch.randint(0, 50, (2, 7)),))),
]
