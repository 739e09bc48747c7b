"""An optional argument that a checked-in module's example leaves to its None default: the
example's specialisation is compiled for None (an entry check requires it), so the code that
depends on it is typed and fuses, and the generic code takes the calls that pass one."""

from __future__ import annotations

from pathlib import Path

import torch

import runtime
from source_module import case_directory, compiled_case

SOURCE = '''
from typing import Optional

import torch
from torch import Tensor, nn

from transpiler import script


@script(example="make_example")
class Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(6, 8)
        self.rec = nn.Linear(8, 8)

    def forward(self, x: Tensor, h0: Optional[Tensor] = None) -> Tensor:
        h = h0 if h0 is not None else x.new_zeros(x.size(0), 8)
        for t in range(x.size(1)):
            h = torch.tanh(self.inp(x[:, t]) + self.rec(h)) * torch.sigmoid(h)
        return h


def make_example():
    torch.manual_seed(0)
    return Recurrent().eval(), (torch.randn(4, 5, 6),)
'''


def test_an_argument_left_to_its_none_default_is_compiled_for_none(tmp_path: Path) -> None:
    with case_directory(tmp_path):
        module, text = compiled_case(tmp_path, "left_out_case", SOURCE)
        example = text[text.index("def Recurrent_forward_example"):]
        assert '_guards.check_value(h0, None, "h0")' in example
        # the state is typed, so the step's pointwise ops are one kernel inside the loop
        body = [line for line in example.split("\n\n\n")[0].splitlines() if not line.strip().startswith("#")]
        assert not any("torch.tanh(" in line for line in body)
        assert any("h = inp_rec_tanh(" in line for line in body)
        model = module.Recurrent().eval()
        x, h0 = torch.randn(3, 5, 6), torch.randn(3, 8)
        for args in ((x,), (x, h0)):  # (the second: the generic code's)
            with torch.no_grad():
                with runtime.mode("strict"):
                    got = model(*args)
                with runtime.mode("off"):
                    want = model(*args)
            torch.testing.assert_close(got, want)
