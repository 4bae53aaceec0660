"""The fused ops as torch custom ops (torch.library): tensors in, tensors out, on the current CUDA
stream, with fake implementations so FakeTensorMode and torch.compile trace them.

The ops take the world as two ints (its id and size) so that tracing needs no GPU and no world;
the public functions in __init__ fill them from a :class:`tilelink.World`.
"""

from __future__ import annotations

import ctypes

import torch
from torch import Tensor

from . import _capi
from ._world import dtype_code, world_by_id

_SUPPORTED = (torch.bfloat16, torch.float16)


def _check_operands(op: str, a: Tensor, b: Tensor) -> tuple[int, int, int]:
    """Local checks of a[m, k] and b[n, k]; returns (m, n, k). Raises ValueError."""
    if a.dtype not in _SUPPORTED or b.dtype != a.dtype:
        raise ValueError(f"tilelink.{op}: a and b must both be bfloat16 or both float16 (got {a.dtype} and {b.dtype})")
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"tilelink.{op}: a and b must be 2-D, a[m, k] and b[n, k] (got {tuple(a.shape)} and "
                         f"{tuple(b.shape)})")
    (m, k), (n, kb) = a.shape, b.shape
    if kb != k:
        raise ValueError(f"tilelink.{op}: a is [m, k] = {tuple(a.shape)} and b must be [n, k], but b is "
                         f"{tuple(b.shape)} (k differs)")
    if m < 1 or n < 1 or k < 1:
        raise ValueError(f"tilelink.{op}: empty operands (m={m}, n={n}, k={k})")
    if k % 8 or n % 8:
        raise ValueError(f"tilelink.{op}: k={k} and n={n} must be multiples of 8 (16-byte rows)")
    if not a.is_contiguous() or not b.is_contiguous():
        raise ValueError(f"tilelink.{op}: a and b must be contiguous row-major tensors (call .contiguous())")
    if a.device.type not in ("cuda", "meta") or b.device != a.device:
        raise ValueError(f"tilelink.{op}: a and b must be on this rank's CUDA device (got {a.device} and {b.device})")
    return m, n, k


def _check_world(op: str, world_size: int) -> None:
    if world_size < 1:
        raise ValueError(f"tilelink.{op}: world size {world_size}")


def _launch(op: str, world_id: int, a: Tensor, b: Tensor, c: Tensor, m: int, n: int, k: int, path: int) -> None:
    world = world_by_id(world_id)
    if a.device != world.device:
        raise ValueError(f"tilelink.{op}: the operands are on {a.device}, but this rank of the world runs on "
                         f"{world.device}")
    if torch.cuda.is_current_stream_capturing():
        raise RuntimeError(f"tilelink.{op}: CUDA graph capture is not supported yet (the ops keep a host-side "
                           "epoch per call); run the op outside the captured region")
    stream = ctypes.c_void_p(torch.cuda.current_stream(a.device).cuda_stream)
    ptr = lambda t: ctypes.c_void_p(t.data_ptr())  # noqa: E731
    args = [dtype_code(a.dtype), ptr(a), ptr(b), ptr(c), m, n, k]
    if op == "ag_gemm":
        args.append(None)  # the gathered A stays in the op's workspace
    world._call("tl_" + op, *args, path, stream)


@torch.library.custom_op("tilelink::ag_gemm", mutates_args=())
def ag_gemm_op(a: Tensor, b: Tensor, world_id: int, world_size: int, path: int) -> Tensor:
    m, n, k = _check_operands("ag_gemm", a, b)
    _check_world("ag_gemm", world_size)
    c = torch.empty((world_size * m, n), dtype=a.dtype, device=a.device)
    _launch("ag_gemm", world_id, a, b, c, m, n, k, path)
    return c


@ag_gemm_op.register_fake
def _(a: Tensor, b: Tensor, world_id: int, world_size: int, path: int) -> Tensor:
    m, n, _k = _check_operands("ag_gemm", a, b)
    _check_world("ag_gemm", world_size)
    return a.new_empty((world_size * m, n))


@torch.library.custom_op("tilelink::gemm_rs", mutates_args=())
def gemm_rs_op(a: Tensor, b: Tensor, world_id: int, world_size: int, path: int) -> Tensor:
    m, n, k = _check_operands("gemm_rs", a, b)
    _check_rows("gemm_rs", m, world_size)
    c = torch.empty((m // world_size, n), dtype=a.dtype, device=a.device)
    _launch("gemm_rs", world_id, a, b, c, m, n, k, path)
    return c


@gemm_rs_op.register_fake
def _(a: Tensor, b: Tensor, world_id: int, world_size: int, path: int) -> Tensor:
    m, n, _k = _check_operands("gemm_rs", a, b)
    _check_rows("gemm_rs", m, world_size)
    return a.new_empty((m // world_size, n))


@torch.library.custom_op("tilelink::gemm_ar", mutates_args=())
def gemm_ar_op(a: Tensor, b: Tensor, world_id: int, world_size: int, path: int) -> Tensor:
    m, n, k = _check_operands("gemm_ar", a, b)
    _check_world("gemm_ar", world_size)
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    _launch("gemm_ar", world_id, a, b, c, m, n, k, path)
    return c


@gemm_ar_op.register_fake
def _(a: Tensor, b: Tensor, world_id: int, world_size: int, path: int) -> Tensor:
    m, n, _k = _check_operands("gemm_ar", a, b)
    _check_world("gemm_ar", world_size)
    return a.new_empty((m, n))


def _check_rows(op: str, m: int, world_size: int) -> None:
    _check_world(op, world_size)
    if m % world_size:
        raise ValueError(f"tilelink.{op}: m={m} must be divisible by the world size {world_size} (each rank "
                         "receives m / world rows)")


def path_code(op: str, path: str) -> int:
    if path not in _capi.PATHS:
        raise ValueError(f"tilelink.{op}: path must be one of {sorted(_capi.PATHS)} (got {path!r})")
    return _capi.PATHS[path]
