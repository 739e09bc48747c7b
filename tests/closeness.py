"""Comparing compiled results with eager's."""

from __future__ import annotations


def assert_close_to_eager(got, expected, msg: str = "") -> None:
    """Compiled against eager within the tolerance of decomposed (and fused) code
    (ir/primitives.TOLERANCE); exact for integer and bool results."""
    import torch

    from ir.kernel.primitives import TOLERANCE

    def check(g, e) -> None:
        if isinstance(e, torch.Tensor):
            atol, rtol = TOLERANCE.get(str(e.dtype).removeprefix("torch."), (0.0, 0.0))
            torch.testing.assert_close(g, e, atol=atol, rtol=rtol, equal_nan=True, msg=msg or None)
        elif isinstance(e, (tuple, list)):
            assert type(g) is type(e) and len(g) == len(e), msg
            for a, b in zip(g, e):
                check(a, b)
        else:
            assert g == e, msg

    check(got, expected)


def strict_and_eager(call):
    """`call()` compiled in strict run mode (a fallback to eager is an error) and in eager mode,
    without grad: the results must match (assert_close_to_eager); the compiled one is returned."""
    import torch

    import runtime

    with torch.no_grad():
        with runtime.mode("strict"):
            got = call()
        with runtime.mode("off"):
            want = call()
    assert_close_to_eager(got, want)
    return got
