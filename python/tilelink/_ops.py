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
_DEVICE_TYPES = ("cuda", "meta")  # meta: shape propagation


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
    if a.device.type not in _DEVICE_TYPES or b.device != a.device:
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


def _launch(op: str, world_id: int, a: Tensor, b: Tensor, c: Tensor, path: int, gathered: Tensor | None = None) -> None:
    world = world_by_id(world_id)
    if a.device != world.device:
        raise ValueError(f"tilelink.{op}: the operands are on {a.device}, but this rank of the world runs on "
                         f"{world.device}")
    (m, k), n = a.shape, b.shape[0]
    stream = ctypes.c_void_p(torch.cuda.current_stream(a.device).cuda_stream)
    ptr = lambda t: ctypes.c_void_p(t.data_ptr())  # noqa: E731
    args = [dtype_code(a.dtype), ptr(a), ptr(b), ptr(c), m, n, k]
    if op == "ag_gemm":
        args.append(None if gathered is None else ptr(gathered))  # else it stays in the op's workspace
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


# ---- the low-latency AllGather --------------------------------------------------------------------
ALLGATHER_LL_MAX_BYTES = 8 << 20


def _allgather_ll_shape(x: Tensor, world_size: int) -> tuple[int, ...]:
    nbytes = x.numel() * x.element_size()
    if x.device.type not in _DEVICE_TYPES:
        raise ValueError(f"tilelink.allgather_ll: x must be on this rank's CUDA device (got {x.device})")
    if not x.is_contiguous():
        raise ValueError("tilelink.allgather_ll: x must be contiguous (call .contiguous())")
    if nbytes == 0 or nbytes % 8 or nbytes > ALLGATHER_LL_MAX_BYTES:
        raise ValueError(f"tilelink.allgather_ll: x has {nbytes} bytes; it must be a positive multiple of 8, at most "
                         f"{ALLGATHER_LL_MAX_BYTES} (use torch.distributed.all_gather_into_tensor for large tensors)")
    return (world_size, *x.shape)


@torch.library.custom_op("tilelink::allgather_ll", mutates_args=())
def allgather_ll_op(x: Tensor, world_id: int, world_size: int) -> Tensor:
    out = torch.empty(_allgather_ll_shape(x, world_size), dtype=x.dtype, device=x.device)
    world = world_by_id(world_id)
    if x.device != world.device:
        raise ValueError(f"tilelink.allgather_ll: x is on {x.device}, but this rank of the world runs on {world.device}")
    stream = ctypes.c_void_p(torch.cuda.current_stream(x.device).cuda_stream)
    world._call("tl_allgather_ll", ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(out.data_ptr()),
                x.numel() * x.element_size(), stream)
    return out


@allgather_ll_op.register_fake
def _(x: Tensor, world_id: int, world_size: int) -> Tensor:
    return x.new_empty(_allgather_ll_shape(x, world_size))


# ---- attention ops: the checks they share -------------------------------------------------------
def _check_qkv(op: str, q: Tensor, k: Tensor, v: Tensor, q_layout: str) -> None:
    """What every attention op asks of q, k, v: one dtype, k and v [batch, kv_len, kv_heads,
    head_dim] alike, and q (of `q_layout`, 3-D or 4-D) with k's batch and head_dim."""
    if q.dtype not in _SUPPORTED or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"{op}: q, k and v must all be bfloat16 or all float16 (got {q.dtype}, {k.dtype}, {v.dtype})")
    if q.dim() != q_layout.count(",") + 1 or k.dim() != 4 or v.shape != k.shape:
        raise ValueError(f"{op}: q must be {q_layout} and k, v [batch, kv_len, kv_heads, head_dim] "
                         f"(got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)})")
    if k.shape[0] != q.shape[0] or k.shape[3] != q.shape[-1]:
        raise ValueError(f"{op}: k's batch and head_dim must match q's (q {tuple(q.shape)}, k {tuple(k.shape)})")


# ---- decode attention over a KV cache split across ranks ----------------------------------------
def _flash_decode_check(q: Tensor, k: Tensor, v: Tensor) -> None:
    op = "tilelink.flash_decode"
    _check_qkv(op, q, k, v, "[batch, q_heads, head_dim]")
    (_b, hq, d), (_bk, _s, hkv, _dk) = q.shape, k.shape
    if d not in (64, 128):
        raise ValueError(f"{op}: head_dim must be 64 or 128 (got {d})")
    if hkv < 1 or hq % hkv or hq // hkv > 16:
        raise ValueError(f"{op}: q_heads ({hq}) must be a multiple of kv_heads ({hkv}), at most 16 per kv head")
    if not (q.is_contiguous() and k.is_contiguous() and v.is_contiguous()):
        raise ValueError(f"{op}: q, k and v must be contiguous (call .contiguous())")
    if q.device.type not in _DEVICE_TYPES or k.device != q.device or v.device != q.device:
        raise ValueError(f"{op}: q, k and v must be on this rank's CUDA device")


@torch.library.custom_op("tilelink::flash_decode", mutates_args=())
def flash_decode_op(q: Tensor, k: Tensor, v: Tensor, scale: float, world_id: int, world_size: int) -> Tensor:
    _flash_decode_check(q, k, v)
    out = torch.empty_like(q)
    world = world_by_id(world_id)
    if q.device != world.device:
        raise ValueError(f"tilelink.flash_decode: q is on {q.device}, but this rank of the world runs on {world.device}")
    (b, hq, d), (_b, s, hkv, _d) = q.shape, k.shape
    stream = ctypes.c_void_p(torch.cuda.current_stream(q.device).cuda_stream)
    ptr = lambda t: ctypes.c_void_p(t.data_ptr())  # noqa: E731
    world._call("tl_flash_decode", dtype_code(q.dtype), ptr(q), ptr(k), ptr(v), ptr(out), b, hq, hkv, d, s,
                float(scale), stream)
    return out


@flash_decode_op.register_fake
def _(q: Tensor, k: Tensor, v: Tensor, scale: float, world_id: int, world_size: int) -> Tensor:
    _flash_decode_check(q, k, v)
    return torch.empty_like(q)


# AllGather-GEMM that also returns the gathered A: what its backward needs for dB, and what
# GEMM-ReduceScatter's backward uses to gather dC once for both of its gradients.
@torch.library.custom_op("tilelink::ag_gemm_gathered", mutates_args=())
def ag_gemm_gathered_op(a: Tensor, b: Tensor, world_id: int, world_size: int, path: int) -> tuple[Tensor, Tensor]:
    c = torch.empty(_output_shape("ag_gemm", a, b, world_size), dtype=a.dtype, device=a.device)
    gathered = torch.empty((world_size * a.shape[0], a.shape[1]), dtype=a.dtype, device=a.device)
    _launch("ag_gemm", world_id, a, b, c, path, gathered)
    return c, gathered


@ag_gemm_gathered_op.register_fake
def _(a: Tensor, b: Tensor, world_id: int, world_size: int, path: int) -> tuple[Tensor, Tensor]:
    c = a.new_empty(_output_shape("ag_gemm", a, b, world_size))
    return c, a.new_empty((world_size * a.shape[0], a.shape[1]))


# ---- autograd: the conjugate collectives of tensor/sequence parallelism -------------------------
# Every backward below is collective where its forward was (every rank runs its backward, in the
# same order, as SPMD training does). With A_r this rank's input and B_r its weight:
#   ag_gemm  C = AG(A) B_r^T        dA_r = rows r of sum_q dC_q B_q = gemm_rs(dC, B_r^T)
#                                   dB_r = dC^T AG(A)
#   gemm_rs  C_r = rows r of sum_q A_q B_q^T
#                                   dA_r = AG(dC) B_r = ag_gemm(dC, B_r^T), dB_r = AG(dC)^T A_r
#   gemm_ar  C = sum_q A_q B_q^T (the same on every rank, so its gradient is too)
#                                   dA_r = dC B_r, dB_r = dC^T A_r   (no communication)


def _save_world(ctx, inputs):
    ctx.world_id, ctx.world_size, ctx.path = inputs[2], inputs[3], inputs[4]


def _ag_setup(ctx, inputs, output):
    _save_world(ctx, inputs)
    ctx.mark_non_differentiable(output[1])
    ctx.save_for_backward(inputs[1], output[1])


def _ag_backward(ctx, grad_c, _grad_gathered):
    b, gathered = ctx.saved_tensors
    grad_c = grad_c.contiguous()
    grad_a = grad_b = None
    if ctx.needs_input_grad[0]:
        grad_a = gemm_rs_op(grad_c, b.t().contiguous(), ctx.world_id, ctx.world_size, ctx.path)
    if ctx.needs_input_grad[1]:
        grad_b = grad_c.t() @ gathered
    return grad_a, grad_b, None, None, None


def _rs_setup(ctx, inputs, output):
    _save_world(ctx, inputs)
    ctx.save_for_backward(inputs[0], inputs[1])


def _rs_backward(ctx, grad_c):
    a, b = ctx.saved_tensors
    grad_a, grad_gathered = ag_gemm_gathered_op(grad_c.contiguous(), b.t().contiguous(), ctx.world_id,
                                                ctx.world_size, ctx.path)
    grad_b = grad_gathered.t() @ a if ctx.needs_input_grad[1] else None
    return (grad_a if ctx.needs_input_grad[0] else None), grad_b, None, None, None


def _ar_setup(ctx, inputs, output):
    _save_world(ctx, inputs)
    ctx.save_for_backward(inputs[0], inputs[1])


def _ar_backward(ctx, grad_c):
    a, b = ctx.saved_tensors
    grad_a = grad_c @ b if ctx.needs_input_grad[0] else None
    grad_b = grad_c.t() @ a if ctx.needs_input_grad[1] else None
    return grad_a, grad_b, None, None, None


ag_gemm_gathered_op.register_autograd(_ag_backward, setup_context=_ag_setup)
gemm_rs_op.register_autograd(_rs_backward, setup_context=_rs_setup)
gemm_ar_op.register_autograd(_ar_backward, setup_context=_ar_setup)


def needs_grad(*tensors: Tensor) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def path_code(op: str, path: str) -> int:
    if path not in _capi.PATHS:
        raise ValueError(f"tilelink.{op}: path must be one of {sorted(_capi.PATHS)} (got {path!r})")
    return _capi.PATHS[path]


# ---- mixture of experts ---------------------------------------------------------------------------
def _ag_moe_check(x: Tensor, topk_ids: Tensor, w: Tensor, world_size: int) -> tuple[int, int, int, int, int]:
    """Checks one rank's ag_moe call; returns (m_per_rank, hidden, n, experts, topk)."""
    op = "tilelink.ag_moe"
    if x.dtype not in _SUPPORTED or w.dtype != x.dtype:
        raise ValueError(f"{op}: x and w must both be bfloat16 or both float16 (got {x.dtype} and {w.dtype})")
    if topk_ids.dtype != torch.int32:
        raise ValueError(f"{op}: topk_ids must be int32 (got {topk_ids.dtype})")
    if x.dim() != 2 or w.dim() != 3 or topk_ids.dim() != 2:
        raise ValueError(f"{op}: x must be [m_per_rank, hidden], topk_ids [world * m_per_rank, topk] and w "
                         f"[experts, n, hidden] (got {tuple(x.shape)}, {tuple(topk_ids.shape)}, {tuple(w.shape)})")
    (m, h), (e, n, hw), (tokens, k) = x.shape, w.shape, topk_ids.shape
    if hw != h:
        raise ValueError(f"{op}: w's last dimension ({hw}) must be x's hidden size ({h})")
    if tokens != world_size * m:
        raise ValueError(f"{op}: topk_ids has {tokens} rows; it must route all world * m_per_rank = "
                         f"{world_size * m} gathered tokens")
    if m < 1 or e < 1 or k < 1 or k > e:
        raise ValueError(f"{op}: need m_per_rank >= 1 and 1 <= topk <= experts (got {m}, topk {k}, experts {e})")
    if h % 8 or n % 8:
        raise ValueError(f"{op}: hidden={h} and n={n} must be multiples of 8 (16-byte rows)")
    if not (x.is_contiguous() and w.is_contiguous() and topk_ids.is_contiguous()):
        raise ValueError(f"{op}: x, topk_ids and w must be contiguous (call .contiguous())")
    if x.device.type not in _DEVICE_TYPES or w.device != x.device or topk_ids.device != x.device:
        raise ValueError(f"{op}: x, topk_ids and w must be on this rank's CUDA device")
    return m, h, n, e, k


@torch.library.custom_op("tilelink::ag_moe", mutates_args=())
def ag_moe_op(x: Tensor, topk_ids: Tensor, w: Tensor, world_id: int, world_size: int, path: int,
              sorted_layout: bool) -> tuple[Tensor, Tensor]:
    m, h, n, e, k = _ag_moe_check(x, topk_ids, w, world_size)
    world = world_by_id(world_id)
    if x.device != world.device:
        raise ValueError(f"tilelink.ag_moe: x is on {x.device}, but this rank of the world runs on {world.device}")
    entries = world_size * m * k
    y = torch.empty((entries, n), dtype=x.dtype, device=x.device)
    rows = torch.empty((entries if sorted_layout else 0,), dtype=torch.int32, device=x.device)
    stream = ctypes.c_void_p(torch.cuda.current_stream(x.device).cuda_stream)
    ptr = lambda t: ctypes.c_void_p(t.data_ptr())  # noqa: E731
    world._call("tl_ag_moe", dtype_code(x.dtype), ptr(x), ptr(topk_ids), ptr(w), ptr(y), m, h, n, e, k,
                ptr(rows) if sorted_layout else None, path, stream)
    return y, rows


@ag_moe_op.register_fake
def _(x: Tensor, topk_ids: Tensor, w: Tensor, world_id: int, world_size: int, path: int,
      sorted_layout: bool) -> tuple[Tensor, Tensor]:
    m, _h, n, _e, k = _ag_moe_check(x, topk_ids, w, world_size)
    entries = world_size * m * k
    return x.new_empty((entries, n)), topk_ids.new_empty((entries if sorted_layout else 0,))


def _moe_rs_check(h: Tensor, topk_ids: Tensor, topk_weights: Tensor, w: Tensor,
                  world_size: int) -> tuple[int, int, int, int, int]:
    """Checks one rank's moe_rs call; returns (tokens, hidden, k_shard, experts, topk)."""
    op = "tilelink.moe_rs"
    if h.dtype not in _SUPPORTED or w.dtype != h.dtype:
        raise ValueError(f"{op}: h and w must both be bfloat16 or both float16 (got {h.dtype} and {w.dtype})")
    if topk_ids.dtype != torch.int32 or topk_weights.dtype != torch.float32:
        raise ValueError(f"{op}: topk_ids must be int32 and topk_weights float32 (got {topk_ids.dtype}, "
                         f"{topk_weights.dtype})")
    if h.dim() != 2 or w.dim() != 3 or topk_ids.dim() != 2 or topk_weights.shape != topk_ids.shape:
        raise ValueError(f"{op}: h must be [tokens * topk, k_shard], w [experts, hidden, k_shard], topk_ids and "
                         f"topk_weights [tokens, topk] (got {tuple(h.shape)}, {tuple(w.shape)}, "
                         f"{tuple(topk_ids.shape)}, {tuple(topk_weights.shape)})")
    (rows, ks), (e, hidden, kw), (tokens, k) = h.shape, w.shape, topk_ids.shape
    if kw != ks or rows != tokens * k:
        raise ValueError(f"{op}: h must be [tokens * topk = {tokens * k}, k_shard = {kw}] (got {tuple(h.shape)})")
    if tokens < 1 or tokens % world_size:
        raise ValueError(f"{op}: tokens={tokens} must be a positive multiple of the world size {world_size}")
    if k < 1 or k > e:
        raise ValueError(f"{op}: need 1 <= topk <= experts (got topk {k}, experts {e})")
    if hidden % 8 or ks % 8:
        raise ValueError(f"{op}: hidden={hidden} and k_shard={ks} must be multiples of 8 (16-byte rows)")
    if not all(t.is_contiguous() for t in (h, w, topk_ids, topk_weights)):
        raise ValueError(f"{op}: h, topk_ids, topk_weights and w must be contiguous (call .contiguous())")
    if h.device.type not in _DEVICE_TYPES or any(t.device != h.device for t in (w, topk_ids, topk_weights)):
        raise ValueError(f"{op}: h, topk_ids, topk_weights and w must be on this rank's CUDA device")
    return tokens, hidden, ks, e, k


def _h_rows_check(h_rows: Tensor | None, entries: int, device) -> None:
    if h_rows is None:
        return
    if h_rows.dtype != torch.int32 or h_rows.shape != (entries,) or not h_rows.is_contiguous() or h_rows.device != device:
        raise ValueError(f"tilelink.moe_rs: h_rows must be a contiguous int32 [tokens * topk = {entries}] tensor on h's "
                         f"device (got {h_rows.dtype} {tuple(h_rows.shape)} on {h_rows.device})")


@torch.library.custom_op("tilelink::moe_rs", mutates_args=())
def moe_rs_op(h: Tensor, topk_ids: Tensor, topk_weights: Tensor, w: Tensor, h_rows: Tensor | None, world_id: int,
              world_size: int, path: int) -> Tensor:
    tokens, hidden, ks, e, k = _moe_rs_check(h, topk_ids, topk_weights, w, world_size)
    _h_rows_check(h_rows, tokens * k, h.device)
    world = world_by_id(world_id)
    if h.device != world.device:
        raise ValueError(f"tilelink.moe_rs: h is on {h.device}, but this rank of the world runs on {world.device}")
    out = torch.empty((tokens // world_size, hidden), dtype=h.dtype, device=h.device)
    stream = ctypes.c_void_p(torch.cuda.current_stream(h.device).cuda_stream)
    ptr = lambda t: ctypes.c_void_p(t.data_ptr())  # noqa: E731
    world._call("tl_moe_rs", dtype_code(h.dtype), ptr(h), ptr(topk_ids), ptr(topk_weights), ptr(w), ptr(out), tokens,
                hidden, ks, e, k, None if h_rows is None else ptr(h_rows), path, stream)
    return out


@moe_rs_op.register_fake
def _(h: Tensor, topk_ids: Tensor, topk_weights: Tensor, w: Tensor, h_rows: Tensor | None, world_id: int,
      world_size: int, path: int) -> Tensor:
    tokens, hidden, _ks, _e, k = _moe_rs_check(h, topk_ids, topk_weights, w, world_size)
    _h_rows_check(h_rows, tokens * k, h.device)
    return h.new_empty((tokens // world_size, hidden))


def _grouped_mm_check(a: Tensor, b: Tensor, offs: Tensor) -> None:
    op = "tilelink.grouped_mm"
    if a.dtype not in _SUPPORTED or b.dtype != a.dtype:
        raise ValueError(f"{op}: a and b must both be bfloat16 or both float16 (got {a.dtype} and {b.dtype})")
    if a.dim() != 2 or b.dim() != 3 or offs.dim() != 1 or offs.dtype != torch.int32:
        raise ValueError(f"{op}: a must be [rows, k], b [groups, n, k] and offs int32 [groups] (got "
                         f"{tuple(a.shape)}, {tuple(b.shape)}, {tuple(offs.shape)} {offs.dtype})")
    if b.shape[2] != a.shape[1] or offs.shape[0] != b.shape[0]:
        raise ValueError(f"{op}: b must be [groups = len(offs), n, k = a.shape[1]] (got a {tuple(a.shape)}, "
                         f"b {tuple(b.shape)}, offs {tuple(offs.shape)})")
    if a.shape[1] % 8 or b.shape[1] % 8:
        raise ValueError(f"{op}: k and n must be multiples of 8 (16-byte rows)")
    if not (a.is_contiguous() and b.is_contiguous() and offs.is_contiguous()):
        raise ValueError(f"{op}: a, b and offs must be contiguous")
    if a.device.type not in _DEVICE_TYPES or b.device != a.device or offs.device != a.device:
        raise ValueError(f"{op}: a, b and offs must be on one CUDA device")


@torch.library.custom_op("tilelink::grouped_mm", mutates_args=())
def grouped_mm_op(a: Tensor, b: Tensor, offs: Tensor) -> Tensor:
    _grouped_mm_check(a, b, offs)
    out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    stream = ctypes.c_void_p(torch.cuda.current_stream(a.device).cuda_stream)
    ptr = lambda t: ctypes.c_void_p(t.data_ptr())  # noqa: E731
    _capi.check(_capi.lib().tl_grouped_gemm(dtype_code(a.dtype), ptr(a), ptr(b), ptr(out), b.shape[1], a.shape[1],
                                            b.shape[0], ptr(offs), a.shape[0], stream))
    return out


@grouped_mm_op.register_fake
def _(a: Tensor, b: Tensor, offs: Tensor) -> Tensor:
    _grouped_mm_check(a, b, offs)
    return a.new_empty((a.shape[0], b.shape[1]))


# ---- attention on one GPU ----------------------------------------------------------------------
def _attention_check(q: Tensor, k: Tensor, v: Tensor) -> None:
    op = "tilelink.attention"
    _check_qkv(op, q, k, v, "[batch, q_len, q_heads, head_dim]")
    (_b, _sq, hq, d), (_bk, _skv, hkv, _dk) = q.shape, k.shape
    if d not in (64, 128):
        raise ValueError(f"{op}: head_dim must be 64 or 128 (got {d})")
    if hkv < 1 or hq % hkv:
        raise ValueError(f"{op}: q_heads ({hq}) must be a multiple of kv_heads ({hkv})")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.stride(3) != 1 or any(s % 8 for s in t.stride()[:3]):
            raise ValueError(f"{op}: {name} must have head_dim contiguous and its other strides multiples of 8 "
                             f"elements (got strides {t.stride()}); call .contiguous()")
    if q.device.type not in _DEVICE_TYPES or k.device != q.device or v.device != q.device:
        raise ValueError(f"{op}: q, k and v must be on one CUDA device")


@torch.library.custom_op("tilelink::attention", mutates_args=())
def attention_op(q: Tensor, k: Tensor, v: Tensor, causal: bool, q_position0: int, scale: float) -> tuple[Tensor, Tensor]:
    _attention_check(q, k, v)
    (b, sq, hq, d), (_b, skv, hkv, _d) = q.shape, k.shape
    out = torch.empty((b, sq, hq, d), dtype=q.dtype, device=q.device)
    lse = torch.empty((b, hq, sq), dtype=torch.float32, device=q.device)
    strides = (ctypes.c_int64 * 12)(*[s for t in (q, k, v, out) for s in (t.stride(0), t.stride(1), t.stride(2))])
    stream = ctypes.c_void_p(torch.cuda.current_stream(q.device).cuda_stream)
    ptr = lambda t: ctypes.c_void_p(t.data_ptr())  # noqa: E731
    _capi.check(_capi.lib().tl_attention_forward(dtype_code(q.dtype), ptr(q), ptr(k), ptr(v), ptr(out), ptr(lse), b,
                                                 sq, skv, hq, hkv, d, strides, int(causal), int(q_position0),
                                                 float(scale), stream))
    return out, lse


@attention_op.register_fake
def _(q: Tensor, k: Tensor, v: Tensor, causal: bool, q_position0: int, scale: float) -> tuple[Tensor, Tensor]:
    _attention_check(q, k, v)
    b, sq, hq, d = q.shape
    return q.new_empty((b, sq, hq, d)), q.new_empty((b, hq, sq), dtype=torch.float32)


# ---- sequence-parallel attention -----------------------------------------------------------------
_SHARDINGS = {"contiguous": 0, "zigzag": 1}


def sharding_code(sharding: str) -> int:
    if sharding not in _SHARDINGS:
        raise ValueError(f"tilelink.sp_attention: sharding must be one of {sorted(_SHARDINGS)} (got {sharding!r})")
    return _SHARDINGS[sharding]


def _sp_attention_check(q: Tensor, k: Tensor, v: Tensor, sharding: int) -> None:
    op = "tilelink.sp_attention"
    _attention_check(q, k, v)
    if k.shape[1] != q.shape[1]:
        raise ValueError(f"{op}: q, k and v must hold the same tokens of each sequence (got {q.shape[1]} and {k.shape[1]})")
    if not (q.is_contiguous() and k.is_contiguous() and v.is_contiguous()):
        raise ValueError(f"{op}: q, k and v must be contiguous [batch, local_len, heads, head_dim] (call .contiguous())")
    if sharding == _SHARDINGS["zigzag"] and q.shape[1] % 2:
        raise ValueError(f"{op}: zig-zag sharding holds two chunks per rank, so local_len ({q.shape[1]}) must be even")


@torch.library.custom_op("tilelink::sp_attention", mutates_args=())
def sp_attention_op(q: Tensor, k: Tensor, v: Tensor, causal: bool, sharding: int, scale: float, world_id: int,
                    world_size: int, path: int) -> tuple[Tensor, Tensor]:
    _sp_attention_check(q, k, v, sharding)
    world = world_by_id(world_id)
    if q.device != world.device:
        raise ValueError(f"tilelink.sp_attention: q is on {q.device}, but this rank of the world runs on {world.device}")
    b, s, hq, d = q.shape
    out = torch.empty_like(q)
    lse = torch.empty((b, hq, s), dtype=torch.float32, device=q.device)
    stream = ctypes.c_void_p(torch.cuda.current_stream(q.device).cuda_stream)
    ptr = lambda t: ctypes.c_void_p(t.data_ptr())  # noqa: E731
    world._call("tl_sp_attention", dtype_code(q.dtype), ptr(q), ptr(k), ptr(v), ptr(out), ptr(lse), b, s, hq,
                k.shape[2], d, int(causal), int(sharding), float(scale), int(path), stream)
    return out, lse


@sp_attention_op.register_fake
def _(q: Tensor, k: Tensor, v: Tensor, causal: bool, sharding: int, scale: float, world_id: int, world_size: int,
      path: int) -> tuple[Tensor, Tensor]:
    _sp_attention_check(q, k, v, sharding)
    b, s, hq, _d = q.shape
    return torch.empty_like(q), q.new_empty((b, hq, s), dtype=torch.float32)
