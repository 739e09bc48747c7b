"""The TorchScript tutorial's MyCell: a Linear, an add and a tanh, returning a tuple."""
import torch
from torch import Tensor, nn

from transpiler import script


@script(example="make_example")
class MyCell(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
        new_h = torch.tanh(self.linear(x) + h)
        return new_h, new_h


def make_example() -> tuple[object, tuple]:
    torch.manual_seed(0)
    model = MyCell().eval()
    x = torch.randn(8, 4)
    h = torch.randn(8, 4)
    return model, (x, h)
