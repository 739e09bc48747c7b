"""Classes written with inheritance: a decorated subclass that takes forward from a base class of
the same file, overrides a method that forward calls, calls the base's version through
`super()`, reads a `@property` and a class-level constant. Compiled ahead of time (generic code
and an example's specialisation) and by `script(model, example_inputs=...)`, each run in strict
mode against eager."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

import runtime
from source_module import case_directory, compiled_case

SOURCE = textwrap.dedent('''
    import torch
    import torch.nn.functional as F
    from torch import Tensor, nn

    from transpiler import script


    class Trunk(nn.Module):
        floor = 0.05

        def __init__(self, width: int, outputs: int) -> None:
            super().__init__()
            self.inp = nn.Linear(8, width)
            self.out = nn.Linear(width, outputs)
            self.width = width

        @property
        def scale(self) -> float:
            return 1.0 / self.width ** 0.5

        @scale.setter
        def scale(self, value: float) -> None:
            raise AttributeError("read only")

        @staticmethod
        def squash(x: Tensor) -> Tensor:
            return torch.tanh(x)

        def features(self, x: Tensor) -> Tensor:
            return self.squash(self.inp(x)) * self.scale

        def forward(self, x: Tensor) -> Tensor:
            return self.out(self.features(x).clamp_min(self.floor))


    @script{decorator}
    class Branchy(Trunk):
        def __init__(self) -> None:
            super().__init__(width=16, outputs=3)
            self.side = nn.Linear(8, 16)

        def features(self, x: Tensor) -> Tensor:
            return super().features(x) + torch.sigmoid(self.side(x))


    @script
    class Twice(Trunk):
        def __init__(self) -> None:
            super().__init__(width=4, outputs=4)

        def forward(self, x: Tensor) -> Tensor:
            return super().forward(x) * 2


    def make_example():
        torch.manual_seed(0)
        return Branchy(), (torch.randn(5, 8),)
''')


def _check(model: torch.nn.Module, x: torch.Tensor) -> None:
    with torch.no_grad():
        with runtime.mode("strict"):
            got = model(x)
        with runtime.mode("off"):
            want = model(x)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("decorator", ["", '(example="make_example")'])
def test_a_subclass_taking_forward_from_its_base_compiles_ahead_of_time(tmp_path: Path, decorator: str) -> None:
    with case_directory(tmp_path):
        module, text = compiled_case(tmp_path, "inherited" + ("_ex" if decorator else ""),
                                     SOURCE.replace("{decorator}", decorator))
        # the subclass's entry runs the base's forward with the subclass's features
        assert '"Branchy.forward"' in text and '"Twice.forward"' in text
        torch.manual_seed(1)
        _check(module.Branchy(), torch.randn(7, 8))
        _check(module.Twice(), torch.randn(2, 8))
        if decorator:
            model, (x,) = module.make_example()
            _check(model, x)
        # the base class itself is not decorated: its instances run eagerly, uncounted
        assert module.Trunk(6, 2)(torch.randn(1, 8)).shape == (1, 2)


def test_a_subclass_taking_forward_from_its_base_compiles_for_an_instance(tmp_path: Path) -> None:
    from source_module import imported_source
    from transpiler import script

    with imported_source(tmp_path, "inherited_jit", SOURCE.replace("{decorator}", "")) as module:
        torch.manual_seed(2)
        x = torch.randn(3, 8)
        for model in (module.Branchy(), module.Twice()):
            compiled = script(model, example_inputs=(x,))
            with torch.no_grad(), runtime.mode("strict"):
                got = compiled(x)
            with torch.no_grad(), runtime.mode("off"):
                want = model(x)
            torch.testing.assert_close(got, want)


def test_super_of_a_method_no_base_class_defines_is_a_diagnostic(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from transpiler.cli import main as cli_main

    path = tmp_path / "nosuper.py"
    path.write_text(textwrap.dedent('''
        import torch
        from torch import Tensor, nn

        from transpiler import script


        @script
        class Net(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.fc = nn.Linear(2, 2)

            def forward(self, x: Tensor) -> Tensor:
                return super().missing(x)
    '''))
    with case_directory(tmp_path):
        assert cli_main(["-q", str(path)]) == 2
    assert "error: `super().missing` is not a method of a base class" in capsys.readouterr().err
    assert not (tmp_path / "nosuper_compiled.py").exists()
