"""The plain GEMM (no world) as a torch custom op, and the process's GEMM tuning switch.

``torch.ops.tilelink.linear(a, b)`` is ``a @ b.T`` for a[m, k] and b[n, k] whose rows may be
strided (a slice of a wider tensor), on tilelink's GEMM engine: the kernel its rule picks for
the shape, or with tuning on the fastest of the rule's best few plans, timed once per new shape.
"""

from __future__ import annotations

import ctypes
import os

import torch
from torch import Tensor

from . import _capi
from ._ops import _DEVICE_TYPES, _SUPPORTED
from ._world import dtype_code


def _rows_qualify(t: Tensor) -> bool:
    """Whether the engine reads t[rows, cols] as it is: contiguous rows a multiple of 8 elements apart."""
    rows, cols = t.shape
    return (cols <= 1 or t.stride(1) == 1) and (rows <= 1 or (t.stride(0) % 8 == 0 and t.stride(0) >= cols))


def _check(a: Tensor, b: Tensor) -> tuple[int, int, int]:
    """The engine's requirements on a[m, k] and b[n, k] (ValueError); returns (m, n, k)."""
    op = "tilelink.linear"
    if a.dtype not in _SUPPORTED or b.dtype != a.dtype:
        raise ValueError(f"{op}: input and weight must both be bfloat16 or both float16 (got {a.dtype} and {b.dtype})")
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"{op}: a must be [m, k] and b [n, k] (got {tuple(a.shape)} and {tuple(b.shape)})")
    (m, k), (n, kb) = a.shape, b.shape
    if kb != k:
        raise ValueError(f"{op}: a is [m, k] = {tuple(a.shape)} and b must be [n, k], but b is {tuple(b.shape)}")
    if k % 8 or n % 8:
        raise ValueError(f"{op}: k={k} and n={n} must be multiples of 8 (16-byte rows)")
    for name, t in (("a", a), ("b", b)):
        if not _rows_qualify(t):
            raise ValueError(f"{op}: {name}'s rows must be contiguous and start a multiple of 8 elements apart "
                             f"(got strides {t.stride()}); call .contiguous()")
    if a.device.type not in _DEVICE_TYPES or b.device != a.device:
        raise ValueError(f"{op}: a and b must be on one CUDA device (got {a.device} and {b.device})")
    return m, n, k


def _leading(t: Tensor, cols: int) -> int:
    return t.stride(0) if t.shape[0] > 1 else cols


@torch.library.custom_op("tilelink::linear", mutates_args=())
def linear_op(a: Tensor, b: Tensor) -> Tensor:
    m, n, k = _check(a, b)
    out = torch.empty((m, n), dtype=a.dtype, device=a.device)
    if m == 0 or n == 0:
        return out
    if k == 0:  # an empty sum, as torch's matmul gives
        return out.zero_()
    # The kernels read 16-byte rows: an operand starting elsewhere (a view at an odd offset) is copied.
    a, b = (t if t.data_ptr() % 16 == 0 else t.clone(memory_format=torch.contiguous_format) for t in (a, b))
    stream = ctypes.c_void_p(torch.cuda.current_stream(a.device).cuda_stream)
    ptr = lambda t: ctypes.c_void_p(t.data_ptr())  # noqa: E731
    with torch.cuda.device(a.device):  # the engine plans for, and launches on, the current device
        _capi.check(_capi.lib().tl_gemm(dtype_code(a.dtype), ptr(a), ptr(b), ptr(out), m, n, k, _leading(a, k),
                                        _leading(b, k), n, stream))
    return out


@linear_op.register_fake
def _(a: Tensor, b: Tensor) -> Tensor:
    m, n, _k = _check(a, b)
    return a.new_empty((m, n))


# The backward's GEMMs are not of the engine's layout (dA = dC b needs b's columns as rows), so they
# run on torch's matmul (cuBLASLt).
def _setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])


def _backward(ctx, grad):
    a, b = ctx.saved_tensors
    grad_a = grad @ b if ctx.needs_input_grad[0] else None
    grad_b = grad.t() @ a if ctx.needs_input_grad[1] else None
    return grad_a, grad_b


linear_op.register_autograd(_backward, setup_context=_setup)


def _rows_of(t: Tensor) -> Tensor:
    """t as the engine's operand: itself where its rows already qualify, else a contiguous copy."""
    return t if _rows_qualify(t) else t.contiguous()


def linear(x: Tensor, weight: Tensor) -> Tensor:
    """``x @ weight.T`` (``F.linear`` without bias) on tilelink's GEMM engine.

    x: [..., k], weight: [n, k], both bfloat16 or both float16, k and n multiples of 8. Leading
    dimensions of x are flattened into rows; operands whose rows are not contiguous, not 8 elements
    apart or not 16-byte aligned are copied first. Differentiable (the backward runs on torch's matmul).
    Returns [..., n]. With tuning on (:func:`set_gemm_tuning`) the first call of each shape times
    the rule's best plans and keeps the fastest.
    """
    if weight.dim() != 2:
        raise ValueError(f"tilelink.linear: weight must be [n, k] (got {tuple(weight.shape)})")
    if x.dim() < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"tilelink.linear: x must be [..., k] with k = weight.shape[1] = {weight.shape[1]} "
                         f"(got {tuple(x.shape)})")
    if x.shape[-1] == 0:  # an empty sum, as torch's matmul gives
        return x.new_zeros((*x.shape[:-1], weight.shape[0]))
    a = _rows_of(x.reshape(-1, x.shape[-1]))
    out = linear_op(a, _rows_of(weight))
    return out.reshape(*x.shape[:-1], weight.shape[0])


def set_gemm_tuning(on: bool) -> None:
    """Turns plain-GEMM tuning on or off for the process (``TILELINK_GEMM_TUNE=1`` turns it on).

    On, each new (shape, leading dimensions) of :func:`linear` first times the rule's best few
    plans on the call's operands, blocking the host for a few to a few hundred milliseconds, and
    keeps the fastest; under CUDA graph capture nothing is timed (the rule's plan runs).
    """
    _capi.check(_capi.lib().tl_gemm_set_tuning(int(bool(on))))


def gemm_tuning() -> bool:
    """Whether plain-GEMM tuning is on."""
    on = ctypes.c_int(0)
    _capi.check(_capi.lib().tl_gemm_tuning(ctypes.byref(on)))
    return bool(on.value)


def load_tuned_plans(path: str | os.PathLike) -> int:
    """Takes the tuned plans a file holds for this GPU model; returns how many lines were taken."""
    lines = ctypes.c_size_t(0)
    _capi.check(_capi.lib().tl_gemm_load_tuned_plans(os.fsencode(path), ctypes.byref(lines)))
    return lines.value


def save_tuned_plans(path: str | os.PathLike) -> int:
    """Writes every tuned plan of the process to a file (replacing it); returns the lines written."""
    lines = ctypes.c_size_t(0)
    _capi.check(_capi.lib().tl_gemm_save_tuned_plans(os.fsencode(path), ctypes.byref(lines)))
    return lines.value


def clear_tuned_plans() -> None:
    """Forgets the process's tuned plans (a tuned-plans file is read again at the next tuning)."""
    _capi.check(_capi.lib().tl_gemm_clear_tuned_plans())
