"""What some of torch's own composite layers compute, written in the compiled subset.

`script(instance, ...)` compiles a submodule from its class's source. torch's own forward for
these layers is not in the subset (a fast-path check built from generator expressions, dict
displays and private helpers), so the compiler reads the classes below in its place: same class
name, same attributes, and the result eager's general ("slow") path computes. Eager's fused
fast path (`torch._transformer_encoder_layer_fwd`, taken in eval mode under no_grad) evaluates
the same math in another order: results agree to float rounding.

Covered: nn.MultiheadAttention with one embedding size for query, key and value
(`_qkv_same_embed_dim`), no `bias_k`/`bias_v`, no `add_zero_attn`, batched or unbatched inputs,
an attention mask of `[L, S]` or one per batch and head; nn.TransformerEncoderLayer
with a torch function (ReLU, GELU by name) or a module as activation. Other configurations fail a check when
compiled (a clear diagnostic), never give another result. This file is read, not imported, by the
compiler (transpiler/jit.py `REFERENCE_CLASSES`).
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def _float_mask(mask: Optional[Tensor], dtype: torch.dtype) -> Optional[Tensor]:
    """F._canonical_mask: a bool mask (True: masked out) becomes 0 / -inf of the query's dtype."""
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        return torch.zeros_like(mask, dtype=dtype).masked_fill(mask, float("-inf"))
    return mask


def _split_heads(x: Tensor, batch_first: bool, heads: int, head_dim: int) -> Tensor:
    """[B, L, E] (batch_first) or [L, B, E] as [B, heads, L, head_dim] (a view)."""
    x = x.reshape(x.size(0), x.size(1), heads, head_dim)
    if batch_first:
        return x.transpose(1, 2)
    return x.permute(1, 2, 0, 3)


class MultiheadAttention(nn.Module):
    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Optional[Tensor] = None,
        need_weights: bool = True,
        attn_mask: Optional[Tensor] = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Optional[Tensor]]:
        torch._assert(self.kdim == self.embed_dim and self.vdim == self.embed_dim,
                      "compiled MultiheadAttention needs one embed_dim for q, k, v")
        torch._assert(self.bias_k is None and not self.add_zero_attn, "compiled MultiheadAttention: no bias_k/add_zero_attn")
        same = key is query and value is query  # self-attention: one projection, as eager's
        unbatched = query.dim() == 2  # [L, E]: computed as a batch of one, as eager does
        batch_dim = 0 if self.batch_first else 1
        if unbatched:
            query = query.unsqueeze(batch_dim)
            key = query if same else key.unsqueeze(batch_dim)
            value = query if same else value.unsqueeze(batch_dim)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        # The projections run on the inputs as they are, [B, L, E] (batch_first) or [L, B, E]: rows
        # are rows either way, and transposing first (as eager's general path does) made linear
        # copy its input, and the head split copy again.
        if self.batch_first:
            bsz = query.size(0)
            tgt_len = query.size(1)
            src_len = key.size(1)
        else:
            tgt_len = query.size(0)
            bsz = query.size(1)
            src_len = key.size(0)
        embed_dim = self.embed_dim
        heads = self.num_heads
        head_dim = embed_dim // heads
        w = self.in_proj_weight
        b = self.in_proj_bias
        if same:
            q, k, v = F.linear(query, w, b).chunk(3, dim=-1)
        elif b is None:
            q = F.linear(query, w[:embed_dim])
            k = F.linear(key, w[embed_dim:2 * embed_dim])
            v = F.linear(value, w[2 * embed_dim:])
        else:
            q = F.linear(query, w[:embed_dim], b[:embed_dim])
            k = F.linear(key, w[embed_dim:2 * embed_dim], b[embed_dim:2 * embed_dim])
            v = F.linear(value, w[2 * embed_dim:], b[2 * embed_dim:])
        q = _split_heads(q, self.batch_first, heads, head_dim)
        k = _split_heads(k, self.batch_first, heads, head_dim)
        v = _split_heads(v, self.batch_first, heads, head_dim)
        mask = _float_mask(attn_mask, query.dtype)
        if mask is not None:
            if mask.dim() == 3:  # [B * heads, L, S] (or [heads, L, S] unbatched), as eager reads it
                mask = mask.reshape(bsz, heads, tgt_len, src_len)
        padding = _float_mask(key_padding_mask, query.dtype)
        if padding is not None:
            padding = padding.reshape(bsz, 1, 1, src_len)
            if mask is None:
                mask = padding
            else:
                mask = mask + padding
        dropout = self.dropout if self.training else 0.0
        weights: Optional[Tensor] = None
        if need_weights:
            scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / float(head_dim) ** 0.5)
            if mask is not None:
                scores = scores + mask
            attn = torch.softmax(scores, dim=-1)
            if dropout > 0.0:
                attn = F.dropout(attn, p=dropout)
            out = torch.matmul(attn, v)
            weights = attn.mean(dim=1) if average_attn_weights else attn
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=is_causal)
        if self.batch_first and not self.training:  # [B, heads, L, head_dim] back to the input's order
            out = F.linear(out.transpose(1, 2).reshape(bsz, tgt_len, embed_dim), self.out_proj.weight,
                           self.out_proj.bias)
        else:
            out = out.permute(2, 0, 1, 3).reshape(tgt_len, bsz, embed_dim)
            out = F.linear(out, self.out_proj.weight, self.out_proj.bias)
            if self.batch_first:
                # (in training, eager's layout, [L, B, E] rows seen as [B, L, E]: a dropout after
                # this layer draws its mask in memory order, so another layout drew other masks)
                out = out.transpose(0, 1)
        if unbatched:
            out = out.squeeze(batch_dim)
            if weights is not None:
                weights = weights.squeeze(0)
        return out, weights


class TransformerEncoderLayer(nn.Module):
    def forward(
        self,
        src: Tensor,
        src_mask: Optional[Tensor] = None,
        src_key_padding_mask: Optional[Tensor] = None,
        is_causal: bool = False,
    ) -> Tensor:
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x: Tensor, attn_mask: Optional[Tensor], key_padding_mask: Optional[Tensor],
                  is_causal: bool) -> Tensor:
        out = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                             need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(out)

    def _ff_block(self, x: Tensor) -> Tensor:
        h = self.activation(self.linear1(x))  # a torch function (F.relu) or a module
        return self.dropout2(self.linear2(self.dropout(h)))
