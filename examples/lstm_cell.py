"""A hand-written LSTM: one Linear for all gates, chunk(4), unrolled over time in a Python loop."""
import torch
from torch import Tensor, nn

from transpiler import script


@script(example="make_example")
class LSTM(nn.Module):
    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.gates = nn.Linear(input_size + hidden_size, 4 * hidden_size)

    def forward(self, x: Tensor, state: tuple[Tensor, Tensor]) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        # x: (time, batch, input_size); state: (h, c), each (batch, hidden_size)
        h, c = state
        outputs: list[Tensor] = []
        for t in range(x.size(0)):
            gates = self.gates(torch.cat([x[t], h], dim=1))
            i, f, g, o = gates.chunk(4, dim=1)
            i = torch.sigmoid(i)
            f = torch.sigmoid(f)
            g = torch.tanh(g)
            o = torch.sigmoid(o)
            c = f * c + i * g
            h = o * torch.tanh(c)
            outputs.append(h)
        return torch.stack(outputs), (h, c)


def make_example() -> tuple[object, tuple]:
    torch.manual_seed(0)
    model = LSTM(32, 64).eval()
    x = torch.randn(12, 8, 32)
    h = torch.randn(8, 64)
    c = torch.randn(8, 64)
    return model, (x, (h, c))
