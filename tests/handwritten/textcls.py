"""A text classifier: token embeddings scaled by sqrt(width), a sine/cosine position table, a
transformer encoder with a padding mask, and a mean over the tokens that are not padding."""
import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from transpiler import script


def position_table(length: int, width: int) -> Tensor:
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    rates = torch.pow(10000.0, -torch.arange(0, width, 2, dtype=torch.float32) / width)
    table = torch.empty(length, width)
    table[:, 0::2] = torch.sin(pos * rates)
    table[:, 1::2] = torch.cos(pos * rates)
    return table


@script(example="make_example")
class TextClassifier(nn.Module):
    def __init__(self, vocab: int = 1000, width: int = 64, classes: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width, padding_idx=0)
        self.register_buffer("positions", position_table(512, width))
        layer = nn.TransformerEncoderLayer(width, 4, 128, dropout=0.1, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(width, classes)
        self.scale = math.sqrt(width)

    def forward(self, tokens: Tensor, lengths: Optional[Tensor] = None) -> Tensor:
        pad = tokens == 0
        x = self.embed(tokens) * self.scale + self.positions[: tokens.size(1)]
        x = self.encoder(x, src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).to(x.dtype)
        pooled = (x * keep).sum(1) / keep.sum(1).clamp_min(1.0)
        return self.head(F.dropout(pooled, 0.1, self.training))


def make_example():
    torch.manual_seed(0)
    tokens = torch.randint(1, 1000, (4, 32))
    tokens[:, 28:] = 0
    return TextClassifier().eval(), (tokens,)
