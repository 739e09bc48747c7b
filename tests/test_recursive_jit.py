"""script(instance, example_inputs=...) compiles recursively, as TorchScript does (docs/models.md):
submodule classes from other files, functions they call, unannotated code, per-structure class
variants, Sequential unrolling under a guard, ModuleDict iteration, overloaded forwards, list
operations, torch's MultiheadAttention / TransformerEncoderLayer, and the code for calls
autograd records. Each model is compared with eager and its generated module is read for what must (not)
be there. The torchvision models themselves are in tests/corpus (make corpus)."""

from __future__ import annotations

import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

import runtime
from runtime.errors import TorchscribeError
from source_module import imported_source
from transpiler import script

LAYERS = '''
from typing import List, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def shuffle(x, groups: int):
    b, c, h, w = x.size()
    return x.view(b, groups, c // groups, h, w).transpose(1, 2).reshape(b, c, h, w)


class Block(nn.Module):
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x
        if self.down is not None:
            identity = self.down(x)
        return F.relu(shuffle(self.bn(self.conv(x)), 2) + identity)


class Dense(nn.Module):
    def __init__(self, cin, growth):
        super().__init__()
        self.conv = nn.Conv2d(cin, growth, 1)

    @torch.jit._overload_method  # noqa: F811
    def forward(self, input: List[Tensor]) -> Tensor:  # noqa: F811
        pass

    @torch.jit._overload_method  # noqa: F811
    def forward(self, input: Tensor) -> Tensor:  # noqa: F811
        pass

    def forward(self, input: Tensor) -> Tensor:  # noqa: F811
        if isinstance(input, Tensor):
            prev = [input]
        else:
            prev = input
        return torch.tanh(self.conv(torch.cat(prev, 1)))


class DenseBlock(nn.ModuleDict):
    def __init__(self, n, cin, growth):
        super().__init__()
        for i in range(n):
            self.add_module("layer%d" % (i + 1), Dense(cin + i * growth, growth))

    def forward(self, x: Tensor) -> Tensor:
        features = [x]
        for name, layer in self.items():
            features.append(layer(features))
        return torch.cat(features, 1)


def window_shift(x: Tensor, window: List[int], shift: List[int], scale: Optional[Tensor] = None,
                 bias: Optional[Tensor] = None) -> Tensor:
    H, W, _ = x.shape[-3:]
    shift = shift.copy()
    if window[0] >= H:
        shift[0] = 0
    if sum(shift) > 0:
        x = torch.roll(x, shifts=(-shift[0], -shift[1]), dims=(1, 2))
    if scale is not None and bias is not None:
        x = x * scale + bias
    return x
'''

MODEL = '''
import torch
from torch import Tensor, nn

from recursive_layers import Block, DenseBlock, window_shift


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.blocks = nn.Sequential(Block(8, 8), Block(8, 16, 2), Block(16, 16))
        self.dense = DenseBlock(3, 16, 4)
        self.window = [4, 4]
        self.shift = [2, 2]

    def forward(self, x):
        y = self.dense(self.blocks(self.stem(x)))
        return window_shift(y.permute(0, 2, 3, 1), self.window, self.shift).mean((1, 2))
'''


@pytest.fixture
def net(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "recursive_layers.py").write_text(textwrap.dedent(LAYERS))
    (tmp_path / "recursive_net.py").write_text(textwrap.dedent(MODEL))
    monkeypatch.syspath_prepend(str(tmp_path))
    import recursive_net

    yield recursive_net, tmp_path
    for name in ("recursive_net", "recursive_layers"):
        sys.modules.pop(name, None)


def generated(cache_dir: Path) -> str:
    """The one module script() wrote into the cache directory `cache_dir`."""
    [path] = (cache_dir / "jit").glob("*.py")
    return path.read_text()


def test_a_model_spread_over_files_compiles_as_one_function(net) -> None:
    module, tmp_path = net
    torch.manual_seed(0)
    model = module.Net().eval()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        compiled = script(model, example_inputs=(x,))
        for batch in (2, 3):
            xb = torch.randn(batch, 3, 16, 16)
            with runtime.mode("strict"):
                got = compiled(xb)
            torch.testing.assert_close(got, model(xb), rtol=1e-5, atol=1e-5)
    text = generated(tmp_path / "cache")
    forward = text[text.index("def Net_forward("):]
    forward = forward[:min(i for i in (forward.find("\ndef ", 1), forward.find("\nCOMPILED")) if i > 0)]
    code = "\n".join(line for line in forward.splitlines() if not line.strip().startswith(("#", "//")))
    # every submodule inlined: no call of a module object is left in the compiled forward
    assert "(features)" not in code and ".dense(" not in code and "shuffle(" not in code
    # Block with and without `down`: two structures, two variants; the None one has no branch
    table = text[text.index("Net_forward_checks = "):text.index("def Net_forward(")]  # (the entry checks)
    assert '("blocks.1.down", "torch.nn.Sequential", "len=2")' in table
    assert '("blocks.0.down", "torch.nn.Sequential"' not in table
    assert '"torch.nn.Sequential", "len=3")' in table  # the unrolled containers are guarded
    assert "# (inlined) " in forward  # comments quote the other file's lines


def test_a_changed_container_runs_eagerly(net) -> None:
    module, _ = net
    model = module.Net().eval()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        compiled = script(model, example_inputs=(x,))
        model.stem.append(nn.Identity())  # the Sequential the code unrolled has four layers now
        with runtime.mode("strict"), pytest.raises(TorchscribeError, match="of 3 layers"):
            compiled(x)


def test_an_edit_to_another_file_compiles_again(net) -> None:
    module, tmp_path = net
    model = module.Net().eval()
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        script(model, example_inputs=(x,))
        layers = tmp_path / "recursive_layers.py"
        layers.write_text(layers.read_text().replace("torch.tanh(", "torch.sigmoid("))
        script(model, example_inputs=(x,))
    assert len(list((tmp_path / "cache" / "jit").glob("*.py"))) == 2


def test_autograd_runs_compiled_code(net) -> None:
    """With grad enabled and parameters that require grad, the compiled code for autograd
    (torch ops, no kernels) runs, in strict mode too, and autograd records it as it records
    eager's: the same gradients."""
    module, _ = net
    model = module.Net().eval()
    twin = module.Net().eval()
    twin.load_state_dict(model.state_dict())
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        compiled = script(model, example_inputs=(x,))
    runtime.dispatch.reset()
    with runtime.mode("strict"):
        out = compiled(x)
    assert out.grad_fn is not None and runtime.fallback_counts() == {}
    out.sum().backward()
    with runtime.mode("off"):
        twin(x).sum().backward()
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("mask", [False, True])
def test_transformer_encoder_layer(tmp_path, monkeypatch, norm_first, mask) -> None:
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, norm_first=norm_first).eval()
    x = torch.randn(2, 10, 32)
    padding = torch.zeros(2, 10, dtype=torch.bool)
    padding[:, 7:] = True
    args = (x, None, padding) if mask else (x,)
    with torch.no_grad():
        compiled = script(layer, example_inputs=args)
        with runtime.mode("strict"):
            got = compiled(*args)
        torch.testing.assert_close(got, layer(*args), rtol=1e-5, atol=1e-5)
    code = [line for line in generated(tmp_path).splitlines() if not line.strip().startswith(("#", "//", '"""'))]
    assert sum(line.count("F.linear(") for line in code) == 4  # one projection for q, k, v, as eager's


@pytest.mark.parametrize(("need_weights", "average"), [(False, True), (True, True), (True, False)])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("inputs", ["batched", "unbatched"])
@pytest.mark.parametrize("mask_rank", [2, 3])
def test_multihead_attention_cross(tmp_path, monkeypatch, need_weights, average, batch_first, inputs, mask_rank) -> None:
    """Query and key/value of other lengths (5 and 7), in either order of batch and sequence or
    unbatched ([L, E]), with an attention mask of one [L, S] for all or one per batch and head
    ([B * heads, L, S]; [heads, L, S] unbatched) and a padding mask, with and without the
    attention weights (averaged over heads or not). Eager reads a 3-d mask per head and
    computes unbatched inputs as a batch of one: before, both raised in the compiled code."""
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path))
    torch.manual_seed(0)
    if inputs == "unbatched":
        q, kv = torch.randn(5, 16), torch.randn(7, 16)
        padding = torch.zeros(7)
        padding[4:] = float("-inf")
        masks = 2
    else:
        q, kv = torch.randn(5, 2, 16), torch.randn(7, 2, 16)
        if batch_first:
            q, kv = q.transpose(0, 1).contiguous(), kv.transpose(0, 1).contiguous()
        padding = torch.zeros(2, 7)  # (a float mask, as attn_mask is: eager warns about mixed kinds)
        padding[1, 4:] = float("-inf")
        masks = 4
    attn_mask = torch.randn(5, 7) if mask_rank == 2 else torch.randn(masks, 5, 7)
    with imported_source(tmp_path, "attend_model", f'''
        import torch
        from torch import nn


        class Attend(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = nn.MultiheadAttention(16, 2, batch_first={batch_first})

            def forward(self, q, kv, attn_mask, padding):
                out, weights = self.attn(q, kv, kv, need_weights={need_weights}, attn_mask=attn_mask,
                                         key_padding_mask=padding, average_attn_weights={average})
                if weights is None:
                    return out, out  # (one return type)
                return out, weights
    ''') as attend_model:
        model = attend_model.Attend().eval()
        args = (q, kv, attn_mask, padding)
        with torch.no_grad():
            compiled = script(model, example_inputs=args)
            with runtime.mode("strict"):
                got = compiled(*args)
            torch.testing.assert_close(got, model(*args), rtol=1e-5, atol=1e-5)


def test_instances_that_differ_in_a_flag_are_variants(tmp_path, monkeypatch) -> None:
    """efficientnet's MBConv: one class, `use_res_connect` True in some instances and False in
    others (and one submodule put back in training mode). A bool flag decides its branch when
    lowering, so each value is a variant of its own: the first instance's flag taken for all
    dropped every residual add, silently (the randomly initialised model's outputs were ~1e-14,
    so the zoo's comparison with eager passed)."""
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "flag_blocks", '''
        import torch
        from torch import nn


        class Block(nn.Module):
            def __init__(self, use_res, scale):
                super().__init__()
                self.conv = nn.Conv2d(4, 4, 1)
                self.use_res = use_res
                self.scale = scale

            def forward(self, x):
                result = self.conv(x) * self.scale
                if self.training:
                    result = result * 0.5
                if self.use_res:
                    result += x
                return result


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.Sequential(Block(False, 2.0), Block(True, 3.0), Block(False, 0.5), Block(True, 1.0))

            def forward(self, x):
                return self.blocks(x)
    ''') as flag_blocks:
        model = flag_blocks.Net().eval()
        model.blocks[3].train()
        x = torch.randn(2, 4, 5, 5)
        with torch.no_grad():
            compiled = script(model, example_inputs=(x,))
            with runtime.mode("strict"):
                torch.testing.assert_close(compiled(x), model(x))
            model.blocks[1].use_res = False  # the compiled code was specialised to True there
            with runtime.mode("strict"), pytest.raises(TorchscribeError, match="use_res"):
                compiled(x)
            torch.testing.assert_close(compiled(x), model(x))  # default mode: eager, right


def test_a_dropout_told_it_is_not_training_is_its_input(tmp_path, monkeypatch) -> None:
    """torchvision's swin passes `training` down to `F.dropout(x, p, training=training)` in a
    helper: the call was compiled as random (an F.dropout call per use) although, inlined, it
    is `training=False`. Now it is the input itself, as in eager, where an in-place add on the
    result also changes the caller's tensor."""
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "drop_helper", '''
        import torch
        import torch.nn.functional as F
        from torch import nn


        def drop(x, p: float, training: bool):
            return F.dropout(x, p=p, training=training)


        class Net(nn.Module):
            def forward(self, x):
                y = drop(x, 0.5, self.training)
                y.add_(1.0)
                return y * 2.0
    ''') as drop_helper:
        model = drop_helper.Net().eval()
        x = torch.randn(3, 4)
        with torch.no_grad():
            compiled = script(model, example_inputs=(x.clone(),))
            text = next((tmp_path / "cache" / "jit").glob("*.py")).read_text()
            assert "dropout(" not in text.split("def Net_forward(")[1], text
            mine, theirs = x.clone(), x.clone()
            with runtime.mode("strict"):
                got = compiled(mine)
            torch.testing.assert_close(got, model(theirs))
            torch.testing.assert_close(mine, theirs)  # the input changed as in eager


def test_a_branch_that_raises_under_scripting(tmp_path, monkeypatch) -> None:
    """densenet's memory-efficient branch: under script(instance) `torch.jit.is_scripting()` is
    True, so the branch raises (as under TorchScript); the other side, a list flowing through a
    compiled helper's loop, keeps types the verifier accepts."""
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "raising_layer", '''
        from typing import List
        import torch
        from torch import Tensor, nn


        class Layer(nn.Module):
            def __init__(self, memory_efficient):
                super().__init__()
                self.conv = nn.Conv2d(4, 4, 1)
                self.memory_efficient = memory_efficient

            def any_requires_grad(self, input: List[Tensor]) -> bool:
                for tensor in input:
                    if tensor.requires_grad:
                        return True
                return False

            def forward(self, input: Tensor) -> Tensor:
                prev = [input]
                if self.memory_efficient and self.any_requires_grad(prev):
                    if torch.jit.is_scripting():
                        raise Exception("Memory Efficient not supported in JIT")
                    out = self.conv(prev[0]) * 2
                else:
                    out = self.conv(torch.cat(prev, 1))
                return torch.relu(out)
    ''') as raising_layer:
        x = torch.randn(1, 4, 5, 5)
        for memory_efficient in (False, True):
            model = raising_layer.Layer(memory_efficient).eval()
            with torch.no_grad():
                compiled = script(model, example_inputs=(x,))
                with runtime.mode("strict"):
                    torch.testing.assert_close(compiled(x), model(x))
        with torch.no_grad(), runtime.mode("strict"), pytest.raises(Exception, match="not supported in JIT"):
            compiled(x.clone().requires_grad_(True))  # under no_grad: the compiled code runs and raises


def test_list_copies_and_item_assignment_keep_python_order(tmp_path, monkeypatch) -> None:
    """A copy taken before `xs[i] = v` keeps the old item and one taken after sees the new one:
    neither common-subexpression elimination nor folding into a later statement may merge or
    move the two reads of the mutated list."""
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "list_order", '''
        import torch
        from torch import nn


        class Lists(nn.Module):
            def forward(self, x):
                s = [x.size(0), x.size(1), x.size(2)][1:]
                a = s.copy()
                s[0] = 1
                b = s.copy()
                c = s[::-1]
                return x * (sum(a) - sum(b)) + c[0]
    ''') as list_order:
        model = list_order.Lists()
        x = torch.randn(2, 3, 4)
        with torch.no_grad():
            compiled = script(model, example_inputs=(x,))
            with runtime.mode("strict"):
                torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)


TREES = '''
import torch
from torch import nn


class Tree(nn.Module):
    """A tree of trees: an inner node holds two Trees of one level less, a leaf a conv and a
    scale it alone has; so each level is an instance of Tree with another structure."""

    def __init__(self, depth, channels, residual=False):
        super().__init__()
        self.residual = residual
        if depth > 1:
            self.left = Tree(depth - 1, channels, residual=True)
            self.right = Tree(depth - 1, channels)
            self.mix = nn.Sequential(nn.Conv2d(2 * channels, channels, 1), nn.ReLU())
            self.leaf = None
        else:
            self.leaf = nn.Conv2d(channels, channels, 3, padding=1)
            self.scale = 0.5 + depth

    def forward(self, x):
        if self.leaf is not None:
            y = torch.tanh(self.leaf(x)) * self.scale
        else:
            a = self.left(x)
            y = self.mix(torch.cat([a, self.right(a)], 1))
        if self.residual:
            y = y + x
        return y


class Forest(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 1)
        self.trees = nn.Sequential(Tree(2, 4), Tree(3, 4), Tree(2, 4))
        self.last = Tree(1, 4)

    def forward(self, x):
        return self.last(self.trees(self.stem(x)))
'''


def test_a_module_holding_instances_of_its_own_class_of_other_structures(tmp_path, monkeypatch) -> None:
    """dla's DlaTree: a module whose children are instances of its own class built otherwise
    (other children, attributes only some levels have). Each structure is a variant of the
    class; compiled as the root, the root's own structure must be the one its entry is compiled
    for, not the first variant met (a leaf's: its entry checks then refused every call)."""
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path / "cache"))
    with imported_source(tmp_path, "trees", TREES) as trees:
        torch.manual_seed(0)
        forest = trees.Forest().eval()
        x = torch.randn(2, 3, 6, 6)
        y = forest.stem(x)
        cases = [(forest, x),  # nested in another module, the variants repeated
                 (forest.trees[1], y),  # the root: depth 3, holding depth 2, holding leaves
                 (forest.trees[1].left, y),  # a subtree, its variants numbered otherwise
                 (forest.last, y)]  # a leaf alone
        with torch.no_grad():
            for model, inputs in cases:
                compiled = script(model, example_inputs=(inputs,))
                for batch in (2, 3):
                    xb = torch.randn(batch, *inputs.shape[1:])
                    with runtime.mode("strict"):
                        got = compiled(xb)
                    torch.testing.assert_close(got, model(xb), rtol=1e-5, atol=1e-5)
