"""Assorted layers in the styles of research code: star imports, `super()` in forward, layers
calling `*args`, a tensor or a tuple returned, module-level tables and helpers, in-place updates
of an input."""

import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

from module_corpus._layers import *  # noqa: F403 (np, SQRT_HALF, LEAK, gelu_tanh, conv_out, Swish)
from module_corpus.attention import FeedForwardBase

logger = logging.getLogger(__name__)

CHANNELS = [4, 8]
CONFIG = {"hidden": 16, "dropout": 0.0, "act": "gelu"}
SCALES = np.array([0.5, 1.0, 2.0], dtype=np.float32)


def init_weights(m):
    if isinstance(m, nn.Linear):
        nn.init.xavier_uniform_(m.weight)


def norm_l2(x, dim=-1):
    return x / (x.norm(dim=dim, keepdim=True) + 1e-6)


class StarImported(nn.Module):
    """Helpers and constants from `from ._layers import *`."""

    def __init__(self, dim=8):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.act = Swish()

    def forward(self, x):
        h = gelu_tanh(self.fc(x)) * SQRT_HALF
        return F.leaky_relu(self.act(h), LEAK) + float(np.float32(0.5))


class ScaledLinear(nn.Linear):
    """A torch layer subclass whose forward calls the parent's through `super()`."""

    def __init__(self, cin, cout, scale=2.0):
        super().__init__(cin, cout)
        self.scale = scale

    def forward(self, x):
        return super().forward(x) * self.scale


class CachedProjection(nn.Module):
    """Python dict bookkeeping kept as Python, and `super()` inside it."""

    def __init__(self, dim=8):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        parts = {"proj": self.proj}
        y = parts["proj"](x)
        named = dict(super().named_children())
        return y + named["proj"].bias


class ClassCounter(nn.Module):
    instances = 0

    def __init__(self):
        super().__init__()
        type(self).instances += 1
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        k = {"n": __class__.__name__}
        return self.fc(x) * len(k["n"])


class Concat(nn.Module):
    """YOLO-style: forward(*args) over the inputs it is given."""

    def __init__(self, dim=1):
        super().__init__()
        self.d = dim

    def forward(self, *xs):
        return torch.cat(xs, self.d)


class MultiInput(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.cat = Concat(-1)

    def forward(self, x, y):
        return self.cat(self.a(x), y)


class Identity(nn.Module):
    def forward(self, *args):
        return args[0] if len(args) == 1 else args


class WithStaticLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.skip = Identity()
        self.act = Mish()

    def forward(self, x):
        return self.act(self.fc(self.skip(x)))


class Mish(nn.Module):
    @staticmethod
    def forward(x):
        return x * torch.tanh(F.softplus(x))


class MaybeTuple(nn.Module):
    """Returns the features too when the batch has more than one row."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        y = self.fc(x)
        if x.size(0) > 1:
            return y, norm_l2(y)
        return y


class UsesMaybeTuple(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = MaybeTuple()

    def forward(self, x):
        out = self.inner(x)
        if isinstance(out, tuple):
            out = out[0] + out[1]
        return torch.relu(out)


class ConfigMLP(nn.Module):
    """Sizes and choices from a module-level dict; weights initialised by a module-level function."""

    def __init__(self, din=8):
        super().__init__()
        self.fc1 = nn.Linear(din, CONFIG["hidden"])
        self.fc2 = nn.Linear(CONFIG["hidden"], din)
        self.drop = nn.Dropout(CONFIG["dropout"])
        self.apply(init_weights)

    def forward(self, x):
        h = self.fc1(x)
        h = F.gelu(h) if CONFIG["act"] == "gelu" else F.relu(h)
        return self.fc2(self.drop(h))


class NumpyScales(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 1)

    def forward(self, x):
        outs = []
        for s in SCALES:
            outs.append(self.conv(x) * float(s))
        return torch.stack(outs, 0).sum(0)


class LoggingBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        logger.debug("input %s", tuple(x.shape))
        return torch.tanh(self.fc(x))


class ResidualFeedForward(FeedForwardBase):
    """A subclass, in another file, of a base class that defines forward."""

    def activation(self, x):
        return gelu_tanh(x)


class InplaceNormalize(nn.Module):
    """Writes its input in place (as some preprocessing layers do) and returns it."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.tensor([0.1, 0.2, 0.3]).view(1, 3, 1, 1))

    def forward(self, x):
        x.sub_(self.mean)
        return x


class ChannelList(nn.Module):
    """Channel counts from a module-level list; conv_out from the star import."""

    def __init__(self):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv2d(3 if i == 0 else CHANNELS[i - 1], c, 3) for i, c in enumerate(CHANNELS)])
        self.size = conv_out(conv_out(12, 3), 3)

    def forward(self, x):
        for conv in self.convs:
            x = F.relu(conv(x))
        return x.view(x.size(0), -1, self.size * self.size).mean(-1)


class Hooked(nn.Module):
    """Spectral norm (a forward pre-hook) on a layer."""

    def __init__(self):
        super().__init__()
        self.fc = nn.utils.spectral_norm(nn.Linear(8, 8))

    def forward(self, x):
        return F.relu(self.fc(x))


class SequentialWithExtras(nn.Sequential):
    """A Sequential subclass with a method of its own."""

    def __init__(self):
        super().__init__(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2))

    def num_params(self):
        return sum(p.numel() for p in self.parameters())


def _vec(n=2, d=8):
    return torch.randn(n, d)


CASES = [
    ("StarImported", lambda: (StarImported().eval(), (_vec(),))),
    ("ScaledLinear", lambda: (ScaledLinear(8, 4).eval(), (_vec(),))),
    ("CachedProjection", lambda: (CachedProjection().eval(), (_vec(),))),
    ("ClassCounter", lambda: (ClassCounter().eval(), (_vec(),))),
    ("Concat", lambda: (Concat().eval(), (torch.randn(2, 3, 4), torch.randn(2, 5, 4)))),
    ("MultiInput", lambda: (MultiInput().eval(), (_vec(), _vec(d=3)))),
    ("WithStaticLayers", lambda: (WithStaticLayers().eval(), (_vec(),))),
    ("Mish", lambda: (Mish().eval(), (_vec(),))),
    ("MaybeTuple", lambda: (MaybeTuple().eval(), (_vec(),))),
    ("UsesMaybeTuple", lambda: (UsesMaybeTuple().eval(), (_vec(),))),
    ("ConfigMLP", lambda: (ConfigMLP().eval(), (_vec(),))),
    ("NumpyScales", lambda: (NumpyScales().eval(), (torch.randn(2, 3, 6, 6),))),
    ("LoggingBlock", lambda: (LoggingBlock().eval(), (_vec(),))),
    ("ResidualFeedForward", lambda: (ResidualFeedForward(8, 16).eval(), (_vec(),))),
    ("InplaceNormalize", lambda: (InplaceNormalize().eval(), (torch.randn(2, 3, 4, 4),))),
    ("ChannelList", lambda: (ChannelList().eval(), (torch.randn(2, 3, 12, 12),))),
    ("Hooked", lambda: (Hooked().eval(), (_vec(),))),
    ("SequentialWithExtras", lambda: (SequentialWithExtras().eval(), (_vec(),))),
]
