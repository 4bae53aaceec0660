"""tilelink: GEMMs overlapped with their tensor-parallel communication, for PyTorch.

    import torch, torch.distributed as dist, tilelink
    dist.init_process_group("nccl"); torch.cuda.set_device(local_rank)
    world = tilelink.init()                      # or tilelink.init(tp_group)
    y = tilelink.ag_gemm(x_shard, w_shard)       # all-gather(x) @ w.T, overlapped
    z = tilelink.gemm_rs(h, w2_shard)            # reduce-scatter(h @ w2.T), overlapped

Every op is collective over the world (SPMD: every rank calls it with matching shapes), runs on
the current CUDA stream, and is a torch custom op (torch.ops.tilelink.*) with a fake
implementation, so torch.compile traces it. ``path`` picks "fused" (communication beside the GEMM),
"decomposed" (cuBLAS and NCCL or the copy engines, in stream order) or "auto" (the library's
measured rule). The ops are
differentiable: each backward is the conjugate collective GEMM (AllGather-GEMM's is a
GEMM-ReduceScatter and the other way round; GEMM-AllReduce's needs no communication), so every
rank must run its backward too, in the same order.
"""

from __future__ import annotations

from torch import Tensor

from . import _ops
from ._gemm import clear_tuned_plans, gemm_tuning, linear, load_tuned_plans, save_tuned_plans, set_gemm_tuning
from ._world import World, default_world, empty, init, zeros

__all__ = ["World", "init", "empty", "zeros", "ag_gemm", "gemm_rs", "gemm_ar", "allgather_ll", "flash_decode", "attention", "sp_attention", "ag_moe", "moe_rs", "grouped_mm",
           "linear", "set_gemm_tuning", "gemm_tuning", "load_tuned_plans", "save_tuned_plans", "clear_tuned_plans",
           "default_world"]
__version__ = "0.1.0"


def ag_gemm(a: Tensor, b: Tensor, *, world: World | None = None, path: str = "auto") -> Tensor:
    """All-gather-GEMM: ``cat([a of every rank]) @ b.T``.

    a: [m_per_rank, k], this rank's rows (e.g. its sequence shard). b: [n, k], e.g. this rank's
    shard of a column-parallel weight (F.linear layout). Returns [world.size * m_per_rank, n].
    """
    world = world or default_world()
    code = _ops.path_code("ag_gemm", path)
    if _ops.needs_grad(a, b):  # the backward needs the gathered A (for dB)
        return _ops.ag_gemm_gathered_op(a, b, world.id, world.size, code)[0]
    return _ops.ag_gemm_op(a, b, world.id, world.size, code)


def gemm_rs(a: Tensor, b: Tensor, *, world: World | None = None, path: str = "auto") -> Tensor:
    """GEMM-reduce-scatter: this rank's rows of ``sum over ranks of a @ b.T``.

    a: [m, k_shard], b: [n, k_shard] (e.g. a row-parallel weight's shard). m must be divisible by
    the world size. Returns [m / world.size, n].
    """
    world = world or default_world()
    return _ops.gemm_rs_op(a, b, world.id, world.size, _ops.path_code("gemm_rs", path))


def gemm_ar(a: Tensor, b: Tensor, *, world: World | None = None, path: str = "auto") -> Tensor:
    """GEMM-all-reduce: ``sum over ranks of a @ b.T`` on every rank (decode-sized m).

    a: [m, k_shard], b: [n, k_shard]. Returns [m, n].
    """
    world = world or default_world()
    return _ops.gemm_ar_op(a, b, world.id, world.size, _ops.path_code("gemm_ar", path))


def allgather_ll(x: Tensor, *, world: World | None = None) -> Tensor:
    """Low-latency all-gather for small tensors (up to 8 MiB; the design point is 1 KB - 1 MB per
    rank): returns ``[world.size, *x.shape]``, every rank's ``x`` in rank order, bitwise. One
    kernel: each rank writes its bytes into every peer as flagged words (data and flag in one
    store), so no separate signal or fence per message. Any dtype; x.nbytes a multiple of 8.
    """
    world = world or default_world()
    return _ops.allgather_ll_op(x, world.id, world.size)


def flash_decode(q: Tensor, k: Tensor, v: Tensor, *, scale: float | None = None, world: World | None = None) -> Tensor:
    """Decode attention over a KV cache split across the ranks of the world.

    q: [batch, q_heads, head_dim], the same on every rank (one query per sequence). k, v: [batch,
    kv_len, kv_heads, head_dim], this rank's shard of each sequence's cache (shards concatenated
    in rank order make the sequence; kv_len may differ between ranks, or be 0). Query head h reads
    kv head h // (q_heads // kv_heads). Returns [batch, q_heads, head_dim] on every rank:
    ``softmax(scale * q k^T) v`` over the whole cache. head_dim 64 or 128; scale defaults to
    1/sqrt(head_dim).
    """
    world = world or default_world()
    return _ops.flash_decode_op(q, k, v, 0.0 if scale is None else float(scale), world.id, world.size)


def attention(q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, q_position0: int = 0,
              scale: float | None = None) -> tuple[Tensor, Tensor]:
    """Attention forward on this GPU (no world): returns ``(out, lse)``.

    q: [batch, q_len, q_heads, head_dim]; k, v: [batch, kv_len, kv_heads, head_dim] (any strides
    with head_dim contiguous, so ``x.transpose(1, 2)`` of SDPA's [batch, heads, len, head_dim]
    works without a copy). Query head h reads kv head h // (q_heads // kv_heads). out: [batch,
    q_len, q_heads, head_dim]; lse: float32 [batch, q_heads, q_len], the natural log of each row's
    softmax denominator. ``causal`` hides key j from query i when j > i + q_position0 (0: SDPA's
    is_causal; kv_len - q_len: FlashAttention's bottom-right alignment); a query that sees no key
    gets zeros and lse = -inf. head_dim 64 or 128; scale defaults to 1/sqrt(head_dim).
    """
    return _ops.attention_op(q, k, v, bool(causal), int(q_position0), 0.0 if scale is None else float(scale))


def sp_attention(q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, sharding: str = "zigzag",
                 scale: float | None = None, world: World | None = None, path: str = "auto") -> tuple[Tensor, Tensor]:
    """Sequence-parallel attention: returns ``(out, lse)`` for this rank's queries over the whole
    sequence.

    q: [batch, local_len, q_heads, head_dim], k, v: [batch, local_len, kv_heads, head_dim]
    (contiguous), this rank's shard of every sequence; ``sharding="zigzag"`` (the sequence cut into
    2 x world.size chunks, rank r holding chunks r and 2W-1-r, which balances causal work) or
    ``"contiguous"`` (rank r holds positions [r L, (r+1) L)). The other ranks' K and V are gathered
    chunk by chunk while the attention kernel runs on what has arrived (this rank's own first).
    out is q's shape; lse float32 [batch, q_heads, local_len]. head_dim 64 or 128.
    """
    world = world or default_world()
    return _ops.sp_attention_op(q, k, v, bool(causal), _ops.sharding_code(sharding),
                                0.0 if scale is None else float(scale), world.id, world.size,
                                _ops.path_code("sp_attention", path))


def ag_moe(x: Tensor, topk_ids: Tensor, w: Tensor, *, world: World | None = None, path: str = "auto",
           sorted_layout: bool = False):
    """AllGather + grouped GEMM: the first GEMM of a tensor-parallel mixture-of-experts layer.

    x: [m_per_rank, hidden], this rank's tokens. topk_ids: int32 [world.size * m_per_rank, topk],
    the experts of every gathered token (the same on every rank). w: [experts, n, hidden], this
    rank's slice of every expert's weight (n = intermediate / world, x2 for fused gate+up).
    Returns y [world.size * m_per_rank * topk, n] with row ``t * topk + j`` = gathered
    ``x[t] @ w[topk_ids[t, j]].T``. With ``sorted_layout=True`` returns ``(y, rows)``: y in the
    expert-sorted order the grouped GEMM computes in, and rows[t * topk + j] the row holding entry
    (t, j). An expert id out of range gives a NaN row, and the next ag_moe call on the world raises
    a RuntimeError that says how many there were.
    """
    world = world or default_world()
    y, rows = _ops.ag_moe_op(x, topk_ids, w, world.id, world.size, _ops.path_code("ag_moe", path), sorted_layout)
    return (y, rows) if sorted_layout else y


def moe_rs(h: Tensor, topk_ids: Tensor, topk_weights: Tensor, w: Tensor, *, h_rows: Tensor | None = None,
           world: World | None = None, path: str = "auto") -> Tensor:
    """Grouped GEMM + top-k weighted sum + reduce-scatter: the second GEMM of a tensor-parallel
    mixture-of-experts layer.

    h: [tokens * topk, k_shard], this rank's slice of the activated intermediate of every (token,
    expert) pair in token order (row ``t * topk + j``; what ag_moe returns, after the activation).
    topk_ids (int32) and topk_weights (float32): [tokens, topk], the same on every rank. w:
    [experts, hidden, k_shard], this rank's slice of every expert's down projection. Returns this
    rank's ``tokens / world.size`` rows of ``sum over ranks and j of topk_weights[t, j] *
    h[t * topk + j] @ w[topk_ids[t, j]].T``. With ``h_rows`` (int32 [tokens * topk]), h is in
    another row order and h_rows[t * topk + j] is the row of entry (t, j): pass ag_moe's
    ``sorted_layout=True`` output (after the activation) and its rows, and no op copies the rows
    back to token order.
    """
    world = world or default_world()
    return _ops.moe_rs_op(h, topk_ids, topk_weights, w, h_rows, world.id, world.size, _ops.path_code("moe_rs", path))


def grouped_mm(a: Tensor, b: Tensor, offs: Tensor) -> Tensor:
    """Grouped GEMM over row segments: rows [offs[g-1], offs[g]) of a[rows, k] times b[g][n, k].T.

    The layout of ``torch._grouped_mm(a, b.transpose(-2, -1), offs=offs)``, computed by tilelink's
    grouped engine (CUTLASS's pointer-array kernel); offs (int32, on the device) is read by the
    device only. No world needed.
    """
    return _ops.grouped_mm_op(a, b, offs)
