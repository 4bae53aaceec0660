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


def _output_shape(op: str, a: Tensor, b: Tensor, world_size: int) -> tuple[int, int]:
    """Checks the call (ValueError) and returns the shape of its output."""
    m, n, _k = _check_operands(op, a, b)
    if world_size < 1:
        raise ValueError(f"tilelink.{op}: world size {world_size}")
    if op == "ag_gemm":
        return world_size * m, n
    if op == "gemm_rs":
        if m % world_size:
            raise ValueError(f"tilelink.{op}: m={m} must be divisible by the world size {world_size} (each rank "
                             "receives m / world rows)")
        return m // world_size, n
    return m, n


def _launch(op: str, world_id: int, a: Tensor, b: Tensor, c: Tensor, path: int) -> None:
    world = world_by_id(world_id)
    if a.device != world.device:
        raise ValueError(f"tilelink.{op}: the operands are on {a.device}, but this rank of the world runs on "
                         f"{world.device}")
    if torch.cuda.is_current_stream_capturing():
        raise RuntimeError(f"tilelink.{op}: CUDA graph capture is not supported yet (the ops keep a host-side "
                           "epoch per call); run the op outside the captured region")
    (m, k), n = a.shape, b.shape[0]
    stream = ctypes.c_void_p(torch.cuda.current_stream(a.device).cuda_stream)
    ptr = lambda t: ctypes.c_void_p(t.data_ptr())  # noqa: E731
    args = [dtype_code(a.dtype), ptr(a), ptr(b), ptr(c), m, n, k]
    if op == "ag_gemm":
        args.append(None)  # the gathered A stays in the op's workspace
    world._call("tl_" + op, *args, path, stream)


def _define(op: str):
    """torch.ops.tilelink.<op>(a, b, world_id, world_size, path) -> Tensor, with its fake."""

    def run(a: Tensor, b: Tensor, world_id: int, world_size: int, path: int) -> Tensor:
        c = torch.empty(_output_shape(op, a, b, world_size), dtype=a.dtype, device=a.device)
        _launch(op, world_id, a, b, c, path)
        return c

    def fake(a: Tensor, b: Tensor, world_id: int, world_size: int, path: int) -> Tensor:
        return a.new_empty(_output_shape(op, a, b, world_size))

    custom = torch.library.custom_op(f"tilelink::{op}", run, mutates_args=())
    custom.register_fake(fake)
    return custom


ag_gemm_op = _define("ag_gemm")
gemm_rs_op = _define("gemm_rs")
gemm_ar_op = _define("gemm_ar")


def path_code(op: str, path: str) -> int:
    if path not in _capi.PATHS:
        raise ValueError(f"tilelink.{op}: path must be one of {sorted(_capi.PATHS)} (got {path!r})")
    return _capi.PATHS[path]
