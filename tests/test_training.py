"""Training runs compiled code (issue 50): with grad enabled and a tensor that requires grad,
compiled code that autograd records runs (the generic code of a checked-in module; the code
script() compiles for such calls), never eager because of grad, in strict mode too. Gradients,
outputs and buffers are compared with eager's: on the examples, on conv/bn/relu nets and a
transformer-style block compiled with script(model, example_inputs=...), on generated programs;
gradcheck in float64; dropout draws what eager draws, batch norm keeps eager's statistics, and
in-place writes keep autograd's errors."""

from __future__ import annotations

import copy
import importlib
import math
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given, settings
from torch import Tensor, nn

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import program_gen as pg  # noqa: E402
from test_examples import CASES  # noqa: E402
from test_programs import SETTINGS, generated_module  # noqa: E402

import runtime  # noqa: E402
from runtime.autograd_kernels import ForAutograd, fused_from  # noqa: E402
from transpiler import script  # noqa: E402


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """script() writes into a cache of this module's; counts start from zero."""
    monkeypatch.setenv("TORCHSCRIBE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "training_cache"))
    runtime.reset()


@pytest.fixture(autouse=True)
def _kernels_at_any_size() -> Any:
    """Pointwise groups run their kernels on the tests' small tensors too (the size below which
    they run their torch ops has a test of its own)."""
    with fused_from(0):
        yield


# -- helpers -----------------------------------------------------------------------------------
def leaves_and_args(inputs: tuple) -> tuple[list[Tensor | None], list[Any]]:
    """For each floating tensor input a leaf that requires grad, and the argument to pass: a
    copy of it made by autograd (so a model that writes its argument in place may, as in eager),
    the leaf collecting the gradient."""
    leaves, args = [], []
    for value in inputs:
        if isinstance(value, Tensor) and value.is_floating_point():
            leaf = value.detach().clone().requires_grad_()
            leaves.append(leaf)
            args.append(leaf.clone())
        else:
            leaves.append(None)
            args.append(copy.deepcopy(value))
    return leaves, args


def loss_of(out: Any) -> Tensor:
    """A scalar of every floating output that requires grad, each weighted by a fixed ramp (a
    plain sum would hide a gradient that is wrong by a permutation)."""
    flat = out if isinstance(out, (tuple, list)) else [out]
    terms = []
    for o in flat:
        if isinstance(o, (tuple, list)):
            terms.append(loss_of(o))
        elif isinstance(o, Tensor) and o.requires_grad:
            ramp = torch.linspace(-1.0, 2.0, o.numel(), dtype=torch.float64).reshape(o.shape).to(o.dtype)
            terms.append((o * ramp).sum().to(torch.float64))
    return sum(terms, torch.zeros((), dtype=torch.float64))


def step(model: Any, inputs: tuple, mode: str, seed: int = 0) -> tuple[Any, dict[str, Tensor | None]]:
    """One forward and backward in `mode`; the output and every gradient (parameters by name,
    inputs by position)."""
    leaves, args = leaves_and_args(inputs)
    torch.manual_seed(seed)
    with runtime.mode(mode):
        out = model(*args)
    loss_of(out).backward()
    grads: dict[str, Tensor | None] = {}
    if isinstance(model, nn.Module):
        grads.update((f"param {n}", p.grad) for n, p in model.named_parameters())
    grads.update((f"input {i}", leaf.grad) for i, leaf in enumerate(leaves) if leaf is not None)
    return out, grads


def assert_same(eager: Any, compiled: Any, where: str, **tol: float) -> None:
    if isinstance(eager, (tuple, list)):
        assert len(eager) == len(compiled), where
        for k, (e, c) in enumerate(zip(eager, compiled)):
            assert_same(e, c, f"{where}[{k}]", **tol)
    elif isinstance(eager, Tensor):
        assert isinstance(compiled, Tensor), where
        assert compiled.requires_grad == eager.requires_grad, f"{where}: requires_grad differs"
        torch.testing.assert_close(compiled.detach(), eager.detach(), equal_nan=True, **tol,
                                   msg=lambda m: f"{where}: {m}")
    elif eager is None:
        assert compiled is None, f"{where}: compiled has a gradient where eager has none"
    else:
        assert compiled == eager, where


NOISE = 4.0  # how much farther from float64's than eager's float32 a compiled gradient may be


def float64_model(eager_model: nn.Module, before: nn.Module) -> nn.Module:
    """Eager's model in float64 with the state `before` (the compiled one's before its step)."""
    model = copy.deepcopy(eager_model)
    model.load_state_dict(before.state_dict())
    for p in model.parameters():
        p.grad = None
    return model.double()


def float64_inputs(inputs: tuple) -> tuple:
    return tuple(t.double() if isinstance(t, Tensor) and t.is_floating_point() else t for t in inputs)


def compare_training(eager_model: Any, compiled_model: Any, inputs: tuple, seed: int = 0, **tol: float) -> None:
    """A training step of each (compiled in strict mode: never eager), the same outputs,
    gradients and buffers. A gradient that differs from eager's float32 one by more than `tol`
    (a weight's gradient sums thousands of terms: a kernel that sums in another order, or in
    double where eager sums in float, moves an entry that the sum cancels down to near 0 by more
    than rtol of it) must be as close to eager's float64 gradient as eager's float32 one is, to
    a factor (NOISE)."""
    out_e, grads_e = step(eager_model, inputs, "off", seed)
    model_before = copy.deepcopy(compiled_model) if isinstance(compiled_model, nn.Module) else None
    out_c, grads_c = step(compiled_model, inputs, "strict", seed)
    assert_same(out_e, out_c, "output", **tol)
    assert grads_c.keys() == grads_e.keys()
    exact: dict[str, Tensor | None] | None = None
    for key in grads_e:
        try:
            assert_same(grads_e[key], grads_c[key], key, **tol)
        except AssertionError:
            if model_before is None or not isinstance(grads_e[key], Tensor):
                raise
            if exact is None:
                exact = step(float64_model(eager_model, model_before), float64_inputs(inputs), "off", seed)[1]
            reference = exact[key]
            assert reference is not None, key
            eager_error = (grads_e[key].double() - reference).abs().max().item()
            error = (grads_c[key].double() - reference).abs().max().item()
            assert error <= NOISE * eager_error + tol.get("atol", 1e-5), \
                f"{key}: {error:.3g} from float64's, eager's float32 gradient {eager_error:.3g}"
    if isinstance(eager_model, nn.Module):
        for (name, b_e), (_, b_c) in zip(eager_model.named_buffers(), compiled_model.named_buffers()):
            assert_same(b_e, b_c, f"buffer {name}", **tol)
    assert runtime.fallback_counts() == {}


# -- the examples: checked-in modules ----------------------------------------------------------
@pytest.mark.parametrize("stem,variant,factory", CASES, ids=[f"{s}[{v}]" if v else s for s, v, _ in CASES])
def test_examples_train_compiled(stem: str, variant: str, factory) -> None:
    """Each example's training step through its checked-in module, in the mode its factory
    leaves it and in train() mode: the code for autograd compiled from its example runs where
    the module has one and its entry checks accept the call (its pointwise groups kernels with
    backward kernels), else the generic code (the specialisations' kernels record no graph);
    autograd records it, and every gradient matches eager's (to float32 rounding where the
    kernels' math is not eager's op for op)."""
    first_mode = None
    for train in (False, True):
        model, inputs = factory()
        if isinstance(model, nn.Module):
            first_mode = model.training if first_mode is None else first_mode
            if train:
                model.train()
        runtime.reset()
        compare_training(copy.deepcopy(model), model, inputs, rtol=1e-4, atol=1e-5)
        key = f"{type(model).__name__}.forward" if isinstance(model, nn.Module) else model.__name__
        entry = importlib.import_module(f"examples.{stem}_compiled").COMPILED[key]
        if not isinstance(entry, tuple):
            continue
        recording = [f for f in entry if isinstance(f, ForAutograd)]
        ran_generic = runtime.generic_counts().get(f"examples.{stem}.{key}", 0)
        # (code for autograd compiled from the first example, `<entry>_autograd`, and where that
        # is in eval(), from one in train(), `<entry>_<example>_autograd`: a call in the mode of
        # one that the module holds runs it)
        own = f"{key.replace('.', '_')}_autograd"
        held = {first_mode if f.fn.__name__ == own else True for f in recording}
        if recording and not variant and getattr(model, "training", first_mode) in held:
            assert ran_generic == 0, "the code for autograd refused the example's own call"
            if stem in FUSED_EXAMPLES:  # (optional_args' group is in a branch its example does not take)
                leaves, args = leaves_and_args(inputs)
                with runtime.mode("strict"):
                    assert "_FusedBackward" in recorded_nodes(model(*args))
        elif not recording:
            assert ran_generic == 1


def recorded_nodes(out: Any) -> set[str]:
    """The class names of every node of the graph autograd recorded for `out`."""
    def tensors(value: Any) -> list[Tensor]:
        if isinstance(value, (tuple, list)):
            return [t for item in value for t in tensors(item)]
        return [value] if isinstance(value, Tensor) else []

    todo = [t.grad_fn for t in tensors(out)]
    seen: set[Any] = set()
    while todo:
        node = todo.pop()
        if node is not None and node not in seen:
            seen.add(node)
            todo += [n for n, _ in node.next_functions]
    return {type(n).__name__ for n in seen}


# The examples whose code for autograd has a pointwise group (ir/passes/autograd_kernels.py):
# an LSTM's and an RNN's gates, a residual chain of sigmoids, a loop's update.
FUSED_EXAMPLES = {"lstm_cell", "rnn_cell", "module_list", "while_loop"}


@pytest.mark.parametrize("stem,variant,factory", CASES, ids=[f"{s}[{v}]" if v else s for s, v, _ in CASES])
def test_examples_train_under_script(stem: str, variant: str, factory) -> None:
    """Each example compiled with script(model, example_inputs=...) in train() mode: its code
    for autograd, where pointwise chains are kernels with generated backward kernels, gives
    eager's outputs, gradients and buffers (to float32 rounding: the kernels' math is not
    eager's op for op)."""
    model, inputs = factory()
    if isinstance(model, nn.Module):
        model.train()
    with torch.no_grad():
        compiled = script(copy.deepcopy(model), example_inputs=inputs)
    compare_training(copy.deepcopy(model), compiled, inputs, rtol=1e-4, atol=1e-5)
    leaves, args = leaves_and_args(inputs)
    with runtime.mode("strict"):
        out = compiled(*args)
    if stem in FUSED_EXAMPLES and not variant:
        assert "_FusedBackward" in recorded_nodes(out)


def test_example_in_strict_mode_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """TORCHSCRIBE=strict: a training step raises nothing; nothing ran eagerly."""
    from examples.residual_block import make_example

    monkeypatch.setenv("TORCHSCRIBE", "strict")
    model, (x,) = make_example()
    model.train()
    loss_of(model(x.requires_grad_())).backward()
    assert runtime.fallback_counts() == {}
    # (BasicBlock has no specialisation: its entry is its generic code alone, and not counted)
    assert runtime.generic_counts() == {"examples.residual_block.ResNetStage.forward": 1}
    assert all(p.grad is not None for p in model.parameters())


def test_records_autograd_finds_a_parameter_anywhere_in_the_tree() -> None:
    """The test every training call of an entry with specialisations makes: a parameter that
    requires grad anywhere below the module (a grandchild's, a module reached twice), none when
    all are frozen or grad is off, and a cycle of modules does not hang it."""
    from runtime.call_inputs import records_autograd

    inner = nn.Sequential(nn.Identity(), nn.Linear(2, 2))
    model = nn.Sequential(nn.ReLU(), nn.Sequential(nn.Identity(), inner), inner)
    x = torch.randn(1, 2)
    assert records_autograd(model, (x,), {})
    inner[1].weight.requires_grad_(False)
    assert records_autograd(model, (x,), {})  # (the bias still does)
    inner[1].bias.requires_grad_(False)
    assert not records_autograd(model, (x,), {})
    assert records_autograd(model, (x.requires_grad_(),), {})
    assert records_autograd(model, (), {"h": [torch.zeros(1, requires_grad=True)]})
    with torch.no_grad():
        assert not records_autograd(model, (x,), {})
    model[1].register_module("back", model)  # (a cycle: modules(), with its memo, ends it)
    assert not records_autograd(model, (x.detach(),), {})
    model[0].register_parameter("p", nn.Parameter(torch.zeros(1)))
    assert records_autograd(model, (x.detach(),), {})


def test_a_frozen_model_without_grad_inputs_runs_its_kernels() -> None:
    """Grad enabled but nothing requires grad (every parameter frozen, a plain input): autograd
    records nothing, so the specialisation's kernels run, not the code for autograd."""
    from examples.rnn_cell import make_example

    model, inputs = make_example()
    for p in model.parameters():
        p.requires_grad_(False)
    with runtime.mode("strict"):
        out, _ = model(*inputs)
    assert runtime.generic_counts() == {} and not out.requires_grad
    model.linear.bias.requires_grad_(True)  # (now it records: its code for autograd runs)
    with runtime.mode("strict"):
        out, _ = model(*inputs)
    assert runtime.generic_counts() == {} and "_FusedBackward" in recorded_nodes(out)


# -- script(model, example_inputs=...) ---------------------------------------------------------
class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: Tensor) -> Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class TinyResNet(nn.Module):
    """torchvision's resnet in small: stem, max pool, two stages, pool, dropout, classifier."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = nn.Sequential(BasicBlock(8, 8, 1), BasicBlock(8, 8, 1))
        self.layer2 = nn.Sequential(BasicBlock(8, 16, 2))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.dropout = nn.Dropout(0.2)
        self.fc = nn.Linear(16, classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer2(self.layer1(x))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(self.dropout(x))


class InvertedResidual(nn.Module):
    """mobilenet_v2's block: expand 1x1, depthwise 3x3, project 1x1, ReLU6, a residual."""

    def __init__(self, channels: int, expand: int) -> None:
        super().__init__()
        hidden = channels * expand
        self.conv = nn.Sequential(
            nn.Conv2d(channels, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, hidden, 3, 1, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden),
            nn.ReLU6(inplace=True), nn.Conv2d(hidden, channels, 1, bias=False), nn.BatchNorm2d(channels))

    def forward(self, x: Tensor) -> Tensor:
        return x + self.conv(x)


class TinyMobileNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6(inplace=True))
        self.blocks = nn.Sequential(InvertedResidual(8, 4), InvertedResidual(8, 2))
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(8, 5))

    def forward(self, x: Tensor) -> Tensor:
        x = self.blocks(self.stem(x))
        x = F.adaptive_avg_pool2d(x, (1, 1))
        return self.classifier(torch.flatten(x, 1))


class SelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int, p: float) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.attn_drop = nn.Dropout(p)
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        B, T, C = x.size()
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.heads))
        att = self.attn_drop(torch.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return F.dropout(self.proj(y), self.p, self.training)


class TransformerBlock(nn.Module):
    """A pre-norm transformer block: attention and a GELU MLP, each with a residual."""

    def __init__(self, dim: int = 32, heads: int = 4, p: float = 0.1) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = SelfAttention(dim, heads, p)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim), nn.Dropout(p))

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Norms(nn.Module):
    """Batch norms of both kinds of running statistics: with a momentum, and a cumulative
    average (momentum None, which the compiled code leaves to the layer's own forward)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.bn = nn.BatchNorm1d(6)
        self.cumulative = nn.BatchNorm1d(6, momentum=None)

    def forward(self, x: Tensor) -> Tensor:
        return self.cumulative(torch.relu(self.bn(self.fc(x))))


NETS = {
    "resnet": (TinyResNet, (4, 3, 16, 16)),
    "mobilenet": (TinyMobileNet, (4, 3, 16, 16)),
    "transformer_block": (TransformerBlock, (2, 8, 32)),
    "norms": (Norms, (5, 6)),
}


def make(name: str, training: bool) -> tuple[nn.Module, nn.Module, Tensor]:
    """(eager model, script()'s copy compiled for it without grad, an input)."""
    cls, shape = NETS[name]
    torch.manual_seed(0)
    eager = cls().train(training)
    x = torch.randn(*shape)
    with torch.no_grad():
        compiled = script(copy.deepcopy(eager), example_inputs=(x,))
    return eager, compiled, x


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("name", NETS)
def test_script_module_gradients(name: str, training: bool) -> None:
    """Gradients of every parameter and of the input, outputs and buffers (the running
    statistics in training, dropout's masks with the same seed) match eager's."""
    eager, compiled, x = make(name, training)
    compare_training(eager, compiled, (x,), seed=3)
    assert all(p.grad is not None for p in compiled.parameters())


def test_transformer_encoder_layer_trains_compiled() -> None:
    """torch's TransformerEncoderLayer, compiled from transpiler/torch_layers.py (no dropout:
    eager's layer draws its masks inside torch's attention)."""
    torch.manual_seed(0)
    eager = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True).train()
    x = torch.randn(2, 6, 32)
    with torch.no_grad():
        compiled = script(copy.deepcopy(eager), example_inputs=(x,))
    compare_training(eager, compiled, (x,), atol=1e-5, rtol=1e-5)


def test_sgd_loop_matches_eager() -> None:
    """Three SGD steps (momentum, weight decay) on each net: the parameters and running
    statistics after the loop are eager's."""
    for name in ("resnet", "transformer_block"):
        eager, compiled, x = make(name, True)
        with torch.no_grad():
            target = torch.randn_like(copy.deepcopy(eager)(x))  # (a copy: its statistics change)
        for model, mode in ((eager, "off"), (compiled, "strict")):
            opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
            torch.manual_seed(7)
            with runtime.mode(mode):
                for _ in range(3):
                    opt.zero_grad()
                    F.mse_loss(model(x), target).backward()
                    opt.step()
        for (key, e), (_, c) in zip(eager.state_dict().items(), compiled.state_dict().items()):
            torch.testing.assert_close(c, e, msg=lambda m: f"{name} {key}: {m}")
        assert runtime.fallback_counts() == {}


def test_train_and_eval_switch_after_script() -> None:
    """script() compiled the model in eval mode; train() later (with grad) compiles the code for
    autograd for the module as it is then, and eval() under no_grad still runs the kernels."""
    eager, compiled, x = make("resnet", False)
    eager.train()
    compiled.train()
    compare_training(eager, compiled, (x,), seed=1)
    eager.eval()
    compiled.eval()
    with torch.no_grad(), runtime.mode("strict"):
        torch.testing.assert_close(compiled(x), eager(x), atol=1e-5, rtol=1e-5)
    assert runtime.fallback_counts() == {}


def test_dropout_draws_from_torch_generator() -> None:
    """In training, dropout's masks come from torch's generator as eager's do: with the same
    seed the same masks, and the generator left where eager leaves it; with and without grad."""
    torch.manual_seed(0)
    eager = TransformerBlock(p=0.5).train()
    x = torch.randn(2, 8, 32)
    with torch.no_grad():
        compiled = script(copy.deepcopy(eager), example_inputs=(x,))
    for grad in (True, False):
        with torch.set_grad_enabled(grad):
            torch.manual_seed(11)
            with runtime.mode("off"):
                expected = eager(x)
            after_eager = torch.rand(4)
            torch.manual_seed(11)
            with runtime.mode("strict"):
                got = compiled(x)
            after_compiled = torch.rand(4)
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
        assert torch.equal(after_compiled, after_eager), "the generator advanced differently"
    assert runtime.fallback_counts() == {}


def test_batch_norm_statistics_are_eagers() -> None:
    """Three training steps: every batch norm's running mean, variance and batch count are
    eager's, bit for bit (the compiled code calls F.batch_norm as the layer does)."""
    eager, compiled, x = make("norms", True)
    for k in range(3):
        compare_training(eager, compiled, (x * (k + 1),))
        for (name, e), (_, c) in zip(eager.named_buffers(), compiled.named_buffers()):
            assert torch.equal(c, e), f"step {k}: {name}"
    assert int(compiled.bn.num_batches_tracked) == 3 and int(compiled.cumulative.num_batches_tracked) == 3


# -- functions and autograd's own checks -------------------------------------------------------
def smooth(x: Tensor, w: Tensor) -> Tensor:
    h = torch.tanh(x @ w) * torch.sigmoid(x).sum(-1, keepdim=True)
    return F.softplus(h) + torch.softmax(h, dim=-1) * x.exp().mean()


def test_gradcheck_in_float64() -> None:
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
    compiled = script(smooth, example_inputs=(x.detach(), w.detach()))
    with runtime.mode("strict"):
        assert torch.autograd.gradcheck(compiled, (x, w))
        assert torch.autograd.gradgradcheck(compiled, (x, w))
    torch.manual_seed(0)
    block = TransformerBlock(16, 2, 0.0).double().train()
    y = torch.randn(2, 3, 16, dtype=torch.float64)
    with torch.no_grad():
        scripted = script(block, example_inputs=(y,))
    with runtime.mode("strict"):
        assert torch.autograd.gradcheck(scripted, (y.requires_grad_(),))
    assert runtime.fallback_counts() == {}


def bump(x: Tensor) -> Tensor:
    x.add_(1.0)
    return x * 2.0


def squash(x: Tensor) -> Tensor:
    y = torch.sigmoid(x)  # (sigmoid's backward reads its result)
    y.mul_(2.0)
    return y


def test_in_place_writes_keep_autograds_errors() -> None:
    """Compiled code for autograd keeps eager's writes: a leaf that requires grad written in
    place raises when written, and a tensor saved for backward written in place raises in
    backward, as in eager; neither becomes a success."""
    x = torch.randn(5)
    bumped, squashed = script(bump, example_inputs=(x,)), script(squash, example_inputs=(x,))
    for fn, mode in ((bump, "off"), (bumped, "strict")):
        with runtime.mode(mode), pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            fn(x.clone().requires_grad_())
    for fn, mode in ((squash, "off"), (squashed, "strict")):
        with runtime.mode(mode):
            out = fn(x.clone().requires_grad_())
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.sum().backward()
    # A copy made by autograd may be written: the gradient flows through the write.
    leaf = x.clone().requires_grad_()
    with runtime.mode("strict"):
        bumped(leaf * 1.0).sum().backward()
    assert torch.equal(leaf.grad, torch.full_like(x, 2.0))
    assert runtime.fallback_counts() == {}


AOT_WRITES = '''
import torch
from torch import Tensor
from transpiler import script


@script
def bump(x: Tensor) -> Tensor:
    x.add_(1.0)
    return x * 2.0


@script
def squash(x: Tensor) -> Tensor:
    y = torch.sigmoid(x)
    y.mul_(2.0)
    return y


@script
def scaled_row(x: Tensor, acc: Tensor) -> Tensor:
    acc[0] = acc[0] * 3.0 + x.sum()
    return torch.tanh(acc)
'''


def test_checked_in_generic_code_keeps_autograds_errors(aot_dir: Path) -> None:
    """The same through a module compiled ahead of time, whose generic code serves these calls:
    eager's writes in eager's order, not functional ops and write-backs."""
    with generated_module(aot_dir, AOT_WRITES) as (path, module):
        text = path.with_name(f"{path.stem}_compiled.py").read_text()
        assert "x.add_(1.0)" in text and ".copy_(" not in text
        x = torch.randn(4)
        for mode in ("off", "strict"):
            with runtime.mode(mode), pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
                module.bump(x.clone().requires_grad_())
            with runtime.mode(mode):
                out = module.squash(x.clone().requires_grad_())
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                out.sum().backward()
        acc = torch.randn(3, 4)
        compare_training(module.scaled_row.__wrapped__, module.scaled_row, (x, acc))


# -- generated programs ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def aot_dir(tmp_path_factory: pytest.TempPathFactory):
    """A directory on sys.path for modules compiled ahead of time, with the default settings:
    row-wise programs get specialisations, which a call autograd records passes over."""
    directory = tmp_path_factory.mktemp("training_programs")
    sys.path.insert(0, str(directory))
    yield directory
    sys.path.remove(str(directory))
    runtime.reset()


def outcome(fn: Any, inputs: tuple, mode: str) -> tuple[Any, dict[str, Tensor | None], str | None]:
    """A training step's output and gradients, or the error it raised (a program may write a
    tensor autograd saved: eager's error must be the compiled code's too)."""
    try:
        out, grads = step(fn, inputs, mode)
    except RuntimeError as error:
        return None, {}, str(error).splitlines()[0]
    return out, grads, None


def compare_program(eager: Any, compiled: Any, prog: pg.Program) -> None:
    inputs = tuple(prog.make_call()[0])
    out_e, grads_e, err_e = outcome(eager, inputs, "off")
    out_c, grads_c, err_c = outcome(compiled, inputs, "strict")
    assert err_c == err_e
    if err_e is None:
        tol = {} if prog.dtype in (torch.float32, torch.float64) else {"atol": 1e-2, "rtol": 1e-2}
        assert_same(out_e, out_c, "output", **tol)
        for key in grads_e:
            assert_same(grads_e[key], grads_c[key], key, **tol)
    assert runtime.fallback_counts() == {}


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True to a scalar")
@settings(max_examples=25, **SETTINGS)
@given(prog=pg.programs())
def test_generated_functions_train(aot_dir: Path, prog: pg.Program) -> None:
    """Checked-in modules of generated programs (views, in-place updates of fresh tensors,
    control flow): eager's gradients, or eager's error."""
    assume(prog.dtype.is_floating_point and not prog.kw_tensor_params and not prog.kw_scalar_args)
    with generated_module(aot_dir, prog.source) as (_, module):
        compare_program(module.f.__wrapped__, module.f, prog)


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True to a scalar")
@settings(max_examples=10, **SETTINGS)
@given(prog=pg.programs(decorate=False, mutate_inputs=True))
def test_generated_functions_jit_train(aot_dir: Path, prog: pg.Program) -> None:
    """script(fn, example_inputs=...) of generated programs that also write their inputs."""
    assume(prog.dtype.is_floating_point and not prog.kw_tensor_params and not prog.kw_scalar_args)
    with generated_module(aot_dir, prog.source, compile_it=False) as (_, module):
        compiled = script(module.f, example_inputs=tuple(prog.make_args()))
        compare_program(module.f, compiled, prog)


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad=True to a scalar")
@settings(max_examples=10, **SETTINGS)
@given(prog=pg.module_programs())
def test_generated_modules_jit_train(aot_dir: Path, prog: pg.Program) -> None:
    """script(instance, example_inputs=...) of generated modules (a Linear, a parameter,
    buffers written in place): gradients of every parameter and input, and the buffers."""
    assume(prog.dtype.is_floating_point and not prog.kw_tensor_params and not prog.kw_scalar_args)
    with generated_module(aot_dir, prog.source, compile_it=False) as (_, module):
        eager = prog.make_module(module)
        with torch.no_grad():
            compiled = script(copy.deepcopy(eager), example_inputs=tuple(prog.make_call()[0]))
        inputs = tuple(prog.make_call()[0])
        out_e, grads_e, err_e = outcome(eager, inputs, "off")
        out_c, grads_c, err_c = outcome(compiled, inputs, "strict")
        assert err_c == err_e
        if err_e is None:
            assert_same(out_e, out_c, "output")
            for key in grads_e:
                assert_same(grads_e[key], grads_c[key], key)
            for (key, e), (_, c) in zip(eager.state_dict().items(), compiled.state_dict().items()):
                assert_same(e, c, f"state_dict[{key!r}]")
        assert runtime.fallback_counts() == {}


def test_sequential_root_trains_compiled() -> None:
    """A root nn.Sequential (compiled as a module calling it, transpiler/roots.py)."""
    torch.manual_seed(0)
    eager = nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Dropout(0.3), nn.Linear(8, 3)).train()
    x = torch.randn(4, 6)
    with torch.no_grad():
        compiled = script(copy.deepcopy(eager), example_inputs=(x,))
    compare_training(eager, compiled, (x,), seed=5)


def normalised(x: Tensor) -> Tensor:
    with torch.no_grad():
        scale = x.abs().amax()
    return torch.tanh(x / scale)


def early(x: Tensor, n: int) -> Tensor:
    if n > 2:
        with torch.no_grad():
            return x * 2.0
    return torch.sigmoid(x)


def test_no_grad_block_under_autograd() -> None:
    """A `with torch.no_grad():` block, compiled as its body for calls autograd does not record,
    stays Python in the code for autograd: it switches grad off as in eager, and its values stay
    out of the graph. One that cannot stay Python (a `return` in it) keeps its entry check: such
    a call runs eagerly (counted; strict mode: an error). (docs/models.md, "Training")"""
    x = torch.randn(3, 4)
    compiled = script(normalised, example_inputs=(x,))
    expected, got = x.clone().requires_grad_(), x.clone().requires_grad_()
    normalised(expected).sum().backward()
    with runtime.mode("strict"):
        compiled(got).sum().backward()
    torch.testing.assert_close(got.grad, expected.grad)
    assert runtime.fallback_counts() == {}
    compiled = script(early, example_inputs=(x, 5))
    with runtime.mode("strict"), pytest.raises(runtime.TorchscribeError, match="no_grad"):
        compiled(x.clone().requires_grad_(), 5)
    with pytest.warns(runtime.TorchscribeWarning, match="running eagerly"):
        out = compiled(x.clone().requires_grad_(), 5)
    assert not out.requires_grad  # (eager's block: no graph)
    assert runtime.fallback_counts() == {"test_training.early": 1}


AOT_NO_GRAD = '''
import torch
from torch import Tensor, nn
from transpiler import script


@script
class EMA(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("avg", torch.zeros(4, 4))

    def forward(self, x: Tensor) -> Tensor:
        with torch.no_grad():
            self.avg.mul_(0.9).add_(self.fc.weight, alpha=0.1)
        return self.fc(x) + x @ self.avg
'''


def test_no_grad_block_in_checked_in_generic_code(aot_dir: Path) -> None:
    """The generic code keeps the block as Python (an exponential average of a weight, written
    under no_grad into a buffer): a training step runs it, with eager's gradients and buffer."""
    with generated_module(aot_dir, AOT_NO_GRAD) as (path, module):
        text = path.with_name(f"{path.stem}_compiled.py").read_text()
        assert "    with torch.no_grad():\n        self.avg.mul_(0.9)" in text
        torch.manual_seed(0)
        eager = module.EMA()
        compiled = copy.deepcopy(eager)
        x = torch.randn(3, 4)
        for _ in range(2):
            compare_training(eager, compiled, (x,))


@pytest.mark.parametrize("batch_first", [True, False], ids=["batch_first", "seq_first"])
def test_transformer_encoder_layer_draws_eagers_dropout_masks(batch_first: bool) -> None:
    """With dropout, the same seed gives the compiled layer eager's masks: the attention's output
    has eager's memory layout in training (a dropout's mask follows memory order)."""
    torch.manual_seed(0)
    eager = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.25, batch_first=batch_first).train()
    x = torch.randn(2, 6, 32)
    with torch.no_grad():
        compiled = script(copy.deepcopy(eager), example_inputs=(x,))
    compare_training(eager, compiled, (x,), seed=5, atol=1e-5, rtol=1e-5)


LOGGED: list[Any] = []


def log_use(obj: Any) -> None:
    LOGGED.append(obj)


class LogsItsUse(nn.Module):
    """Eager-only work that does not compile (a function passed as a value to a Python helper,
    torchvision's API-usage logging) under `not torch.jit.is_scripting()`."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x: Tensor) -> Tensor:
        if not torch.jit.is_scripting():
            log_use(torch.tanh)
        return torch.tanh(self.lin(x)) * 2.0


def test_eager_only_work_that_does_not_compile_is_skipped_for_autograd() -> None:
    """script()'s code for autograd is compiled again without it, as TorchScript skips it: the
    call autograd records runs compiled code (strict mode), with eager's values and gradients."""
    torch.manual_seed(0)
    eager = LogsItsUse()
    x = torch.randn(3, 6)
    with torch.no_grad():
        compiled = script(copy.deepcopy(eager), example_inputs=(x,))
    before = len(LOGGED)
    compare_training(eager, compiled, (x,))
    assert len(LOGGED) == before + 1  # (eager's call logged; the compiled one skipped it)
