"""Buffers a compiled function keeps between calls (ir/passes/plan.py, `keep_buffers`).

A large temporary that a fused kernel or a matrix product writes and nothing outside the call
sees goes into a slot of a `Buffers` set instead of a fresh tensor. On the CPU a fresh tensor of megabytes costs page faults
whenever glibc has handed the memory back to the system in between (it trims the heap's top when
enough of it is free, and maps allocations over its mmap threshold anew each time): how often
depends on what else the process allocated, and efficientnet_b0 at batch 8 faulted 28,900 pages
a call in a process that had run other models against 9,400 alone. A slot's storage stays.

Each call takes a set for itself (`take`) and gives it back before it returns (`give`), so two
calls running at once, in two threads or one inside the other, never share a slot; a call that
raises gives nothing back, and its set is dropped. A slot keeps the largest storage it was asked
for and hands out a view of its start, so a symbolic batch that changes between calls reuses it.

TORCHSCRIBE_KEEP_BUFFERS=0 (read at import) keeps nothing: each call gets a new set, and the
kernels' outputs are new tensors as without planning. `release()` drops every set kept now.
"""

from __future__ import annotations

import math
import os

import torch

KEEP = os.environ.get("TORCHSCRIBE_KEEP_BUFFERS", "1") != "0"

_free: dict[str, list[Buffers]] = {}  # function key -> sets given back, not in use


class Buffers:
    """The slots of one call: slot -> (storage as bytes, the view handed out last)."""

    __slots__ = ("key", "slots")

    def __init__(self, key: str) -> None:
        self.key = key
        self.slots: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def get(self, slot: int, sizes: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """A dense CPU tensor of `sizes` and `dtype` in the slot's storage; what it holds is garbage."""
        held = self.slots.get(slot)
        if held is not None and held[1].dtype is dtype and held[1].shape == sizes:
            return held[1]
        nbytes = math.prod(sizes) * dtype.itemsize
        # (made outside inference mode: a tensor or view made in it may not be written outside
        # it, as `torch.matmul(..., out=)` of a later call under no_grad would)
        storage = held[0] if held is not None and held[0].numel() >= nbytes else None
        with torch.inference_mode(False):
            if storage is None:
                storage = torch.empty(nbytes, dtype=torch.uint8, device="cpu")
            view = storage[:nbytes].view(dtype).view(sizes)
        self.slots[slot] = (storage, view)
        return view


def take(key: str) -> Buffers:
    """A set of buffers no running call holds: one a finished call of `key` gave back, or new."""
    free = _free.get(key)
    if free:
        try:
            return free.pop()
        except IndexError:  # (another thread took the last one)
            pass
    return Buffers(key)


def give(buffers: Buffers) -> None:
    """Hands a call's set back for the next call of its function."""
    if KEEP:
        _free.setdefault(buffers.key, []).append(buffers)


def release() -> None:
    """Drops every set kept now (the memory is freed as the sets go); calls later make new ones."""
    _free.clear()
