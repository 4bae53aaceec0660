"""The Python package on GPUs, one process per rank:

    torchrun --nproc-per-node 2 -m pytest -q tests/python/test_gpu.py

Every op on every path against a float32 PyTorch reference built from every rank's inputs (fresh
random data, outputs poisoned first), on a non-default stream, on worlds made from the default
group and from subgroups; symmetric tensors; CUDA graph capture and replay; errors for mismatched
shapes across ranks and for a first call inside a capture; a timed-out call that every rank
survives. Collective: every rank runs the same tests in the same order.
"""

import os

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

import tilelink

pytestmark = pytest.mark.skipif("LOCAL_RANK" not in os.environ, reason="run under torchrun")

PATHS = ("auto", "fused", "decomposed")


@pytest.fixture(scope="module")
def world():
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    if not dist.is_initialized():
        dist.init_process_group("nccl", device_id=torch.device("cuda", torch.cuda.current_device()))
    w = tilelink.init(heap_bytes=1 << 30)
    yield w
    w.close()


def seed_everyone():
    # A fresh seed per test, printed, the same on every rank (each rank derives its own data).
    s = torch.randint(0, 2**62, (1,), device="cuda")
    dist.broadcast(s, 0)
    print(f"seed {int(s)} (rank {dist.get_rank()})")
    return int(s)


def rand(shape, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, generator=g, device="cuda", dtype=torch.float32).to(dtype)


def gather(t, group=None):
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, t.contiguous(), group=group)
    return parts


def check_close(got, want, what, parts=None, slack=0.0):
    """Elementwise: bf16 rounds each output, and on the reduction paths each rank's partial
    (`parts`, fp32), to 2^-9 of its size; the bound allows twice that plus `slack` (inputs the
    reference rounded differently). fp32 accumulation-order differences are far below it."""
    assert not torch.isnan(got).any(), f"{what}: NaN in the output (poisoned region not written)"
    parts = [want] if parts is None else parts
    err = (got.float() - want).abs()
    tol = 2**-8 * (want.abs() + sum(p.abs() for p in parts)) + 1e-3 + slack
    bad = (err > tol).sum().item()
    rel = (got.float() - want).norm() / want.norm().clamp_min(1e-6)
    worst = (err / tol).max().item()
    assert bad == 0 and rel < 1e-2, f"{what}: {bad} elements off (worst at {worst:.2f}x the bound), relative error {rel:.3e}"


def poison_on_alloc():
    # Outputs come from the caching allocator: fill freed blocks with NaN so an op that leaves
    # part of its output unwritten shows up.
    junk = torch.full((64 << 20,), float("nan"), dtype=torch.bfloat16, device="cuda")
    del junk


SHAPES = [(128, 256, 512), (96, 1000, 264), (512, 1536, 1024)]  # (m per rank, n, k)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_ag_gemm(world, path, dtype):
    seed = seed_everyone()
    for i, (m, n, k) in enumerate(SHAPES):
        a = rand((m, k), dtype, seed + 10 * dist.get_rank() + i)
        b = rand((n, k), dtype, seed + 1000 + 10 * dist.get_rank() + i)
        poison_on_alloc()
        c = tilelink.ag_gemm(a, b, path=path)
        want = torch.cat(gather(a)).float() @ b.float().t()
        check_close(c, want, f"ag_gemm {path} {dtype} m/rank={m} n={n} k={k}")


@pytest.mark.parametrize("path", PATHS)
def test_gemm_rs(world, path):
    seed = seed_everyone()
    w = world.size
    for i, (m, n, k) in enumerate(SHAPES):
        a = rand((m * w, k), torch.bfloat16, seed + 10 * dist.get_rank() + i)
        b = rand((n, k), torch.bfloat16, seed + 1000 + 10 * dist.get_rank() + i)
        poison_on_alloc()
        c = tilelink.gemm_rs(a, b, path=path)
        parts = [(x.float() @ y.float().t()).chunk(w)[dist.get_rank()] for x, y in zip(gather(a), gather(b))]
        check_close(c, sum(parts), f"gemm_rs {path} m={m * w} n={n} k={k}", parts)


@pytest.mark.parametrize("path", PATHS)
def test_gemm_ar(world, path):
    seed = seed_everyone()
    for i, (m, n, k) in enumerate([(1, 256, 512), (37, 1000, 264), (256, 1024, 1024)]):
        a = rand((m, k), torch.bfloat16, seed + 10 * dist.get_rank() + i)
        b = rand((n, k), torch.bfloat16, seed + 1000 + 10 * dist.get_rank() + i)
        poison_on_alloc()
        c = tilelink.gemm_ar(a, b, path=path)
        parts = [x.float() @ y.float().t() for x, y in zip(gather(a), gather(b))]
        check_close(c, sum(parts), f"gemm_ar {path} m={m} n={n} k={k}", parts)


def test_runs_on_the_current_stream(world):
    # Calls on a side stream, with the inputs produced on that stream and no synchronisation
    # between producer and op: the op must be ordered on the current stream.
    seed = seed_everyone()
    m, n, k = 256, 512, 1024
    s = torch.cuda.Stream()
    ref_a = rand((m, k), torch.bfloat16, seed + dist.get_rank())
    b = rand((n, k), torch.bfloat16, seed + 100 + dist.get_rank())
    ins, outs = [], []
    with torch.cuda.stream(s):
        for step in range(4):
            ins.append(ref_a * (step + 1))  # produced on s, consumed on s
            outs.append(tilelink.ag_gemm(ins[-1], b, path="fused"))
    s.synchronize()
    for step, (a, c) in enumerate(zip(ins, outs)):
        want = torch.cat(gather(a)).float() @ b.float().t()
        check_close(c, want, f"ag_gemm on a side stream, call {step}")


def test_symmetric_tensors(world):
    before = world.heap_free
    t = world.empty((64, 128), torch.bfloat16)
    z = tilelink.zeros((3, 5), torch.float16)
    assert t.shape == (64, 128) and t.dtype == torch.bfloat16 and t.device == world.device
    assert z.abs().sum().item() == 0
    assert world.heap_free < before
    t.fill_(dist.get_rank() + 1)  # writable memory
    torch.cuda.synchronize()
    assert t.float().mean().item() == dist.get_rank() + 1
    # Symmetric tensors are ordinary inputs to the ops too.
    b = torch.ones(256, 128, dtype=torch.bfloat16, device="cuda")
    c = tilelink.ag_gemm(t, b)
    want = torch.cat([torch.full((64, 256), 128.0 * (r + 1)) for r in range(world.size)]).cuda()
    check_close(c, want, "ag_gemm of symmetric tensors")


def test_shapes_that_differ_across_ranks_are_refused(world):
    if world.size == 1:
        pytest.skip("needs two ranks")
    # Shapes no rank has called before: ranks compare a call's shape the first time they see it
    # (a rank repeating a known shape while a peer calls a new one cannot be told apart).
    m = 40 + 8 * dist.get_rank()
    a = torch.randn(m, 128, device="cuda").bfloat16()
    b = torch.randn(256, 128, device="cuda").bfloat16()
    with pytest.raises(RuntimeError, match="differs across ranks"):
        tilelink.ag_gemm(a, b)
    # The world keeps working afterwards.
    a = torch.randn(64, 128, device="cuda").bfloat16()
    c = tilelink.ag_gemm(a, b)
    check_close(c, torch.cat(gather(a)).float() @ b.float().t(), "ag_gemm after a refused call")


def test_graph_capture_replays(world):
    # One graph holding every op (and an autograd-free MLP block's worth of calls), replayed 100
    # times on fresh inputs copied into the captured input tensors; every replay's outputs must
    # equal the same calls made without a graph on those inputs (bitwise: same kernels, same plan).
    seed = seed_everyone()
    r, w = dist.get_rank(), world.size
    dt = torch.bfloat16
    shapes = {"ag": (64, 256, 512), "rs": (32 * w, 384, 256), "ar": (129, 256, 192)}  # (m, n, k)
    static = {name: rand((m, k), dt, seed + 17 * i + r) for i, (name, (m, n, k)) in enumerate(shapes.items())}
    weights = {name: rand((n, k), dt, seed + 1000 + 17 * i + r) for i, (name, (m, n, k)) in enumerate(shapes.items())}
    # Attention: a few query tiles over long keys (the keys are split, with a stream-ordered
    # workspace allocated inside the capture), and sequence-parallel attention (zig-zag, causal).
    static["attn"] = rand((1, 200, 2, 128), dt, seed + 91 + r)
    weights["attn"] = rand((2, 1, 6000, 2, 128), dt, seed + 1091 + r)
    static["sp"] = rand((1, 64, 4, 64), dt, seed + 93 + r)
    weights["sp"] = rand((2, 1, 64, 2, 64), dt, seed + 1093 + r)

    def block():
        return (tilelink.ag_gemm(static["ag"], weights["ag"], path="fused"),
                tilelink.gemm_rs(static["rs"], weights["rs"], path="fused"),
                tilelink.gemm_ar(static["ar"], weights["ar"]),
                tilelink.ag_gemm(static["ag"], weights["ag"]),
                *tilelink.attention(static["attn"], weights["attn"][0], weights["attn"][1], causal=True,
                                    q_position0=6000 - 200),
                *tilelink.sp_attention(static["sp"], weights["sp"][0], weights["sp"][1], causal=True))

    sets = [{name: rand(t.shape, dt, seed + 5000 + 31 * s + 7 * i + r) for i, (name, t) in enumerate(static.items())}
            for s in range(3)]
    expected = []
    for inputs in sets:  # without a graph; these calls also agree on the shapes across ranks
        for name, t in inputs.items():
            static[name].copy_(t)
        expected.append([o.clone() for o in block()])
    # A reference that does not rely on tilelink at all, for one input set.
    for name, t in sets[0].items():
        static[name].copy_(t)
    want_ag = torch.cat(gather(static["ag"])).float() @ weights["ag"].float().t()
    check_close(expected[0][0], want_ag, "ag_gemm without a graph")

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = block()
    for rep in range(100):
        k = (rep * 7 + seed) % len(sets)
        for name, t in sets[k].items():
            static[name].copy_(t)
        for o in outputs:
            o.fill_(float("nan"))
        graph.replay()
        for i, (got, want) in enumerate(zip(outputs, expected[k])):
            assert torch.equal(got, want), f"replay {rep}, output {i}, input set {k}: differs from the call without a graph"
        if rep % 25 == 24:  # calls without the graph in between
            again = block()
            assert all(torch.equal(got, want) for got, want in zip(again, expected[k]))


def test_first_call_of_a_shape_is_refused_inside_a_capture(world):
    a = torch.randn(24, 136, device="cuda").bfloat16()
    b = torch.randn(8 * 43, 136, device="cuda").bfloat16()
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="before capturing"):
        with torch.cuda.graph(graph):
            tilelink.ag_gemm(a, b)
    # The world keeps working afterwards, and the shape is capturable once called.
    c = tilelink.ag_gemm(a, b)
    check_close(c, torch.cat(gather(a)).float() @ b.float().t(), "ag_gemm after a refused capture")


def test_subgroup_worlds(world):
    # One world per rank (singleton groups) and one over an explicit subgroup of every rank:
    # nothing of the default world is used.
    size, rank = dist.get_world_size(), dist.get_rank()
    singles = [dist.new_group([r]) for r in range(size)]
    everyone = dist.new_group(list(range(size)))
    mine = tilelink.init(singles[rank], heap_bytes=256 << 20)
    sub = tilelink.init(everyone, heap_bytes=256 << 20)
    try:
        assert mine.size == 1 and mine.rank == 0 and sub.size == size
        a = torch.randn(96, 256, device="cuda").bfloat16()
        b = torch.randn(512, 256, device="cuda").bfloat16()
        check_close(tilelink.gemm_ar(a, b, world=mine), a.float() @ b.float().t(), "one-rank world")
        c = tilelink.ag_gemm(a, b, world=sub, path="fused")
        check_close(c, torch.cat(gather(a)).float() @ b.float().t(), "subgroup world")
    finally:
        sub.close()
        mine.close()


def test_a_world_over_nvshmem(world):
    # The same ops over the other transport: heaps from nvshmem_malloc, peers through nvshmem_ptr
    # (NVSHMEM initialised over the torch group's unique-id exchange). Closed before the module's
    # other worlds go on, since a process takes part in one NVSHMEM world at a time.
    if os.environ.get("TILELINK_SKIP_NVSHMEM") == "1":
        pytest.skip("TILELINK_SKIP_NVSHMEM=1")
    seed = seed_everyone()
    nv = tilelink.init(heap_bytes=256 << 20, transport="nvshmem")
    try:
        assert nv.transport == "NVSHMEM" and world.transport == "CUDA IPC"
        a = rand((96, 256), torch.bfloat16, seed + dist.get_rank())
        b = rand((512, 256), torch.bfloat16, seed + 1000)
        for path in ("fused", "decomposed"):
            c = tilelink.ag_gemm(a, b, world=nv, path=path)
            check_close(c, torch.cat(gather(a)).float() @ b.float().t(), f"ag_gemm over NVSHMEM, {path}")
        w, rank = dist.get_world_size(), dist.get_rank()
        a2 = rand((96 * w, 256), torch.bfloat16, seed + 3000 + rank)
        c = tilelink.gemm_rs(a2, b, world=nv, path="fused")
        parts = [(x.float() @ b.float().t()).chunk(w)[rank] for x in gather(a2)]
        check_close(c, sum(parts), "gemm_rs over NVSHMEM", parts)
        x = nv.empty((1000,), torch.float32)
        assert x.device == world.device
    finally:
        nv.close()


@pytest.mark.parametrize("shape, dtype", [((1,), torch.float64), ((512,), torch.bfloat16), ((4, 1000), torch.float16),
                                          ((131072, 2), torch.float32)])
def test_allgather_ll_matches_nccl_bitwise(world, shape, dtype):
    seed = seed_everyone()
    x = rand(shape, torch.float32, seed + dist.get_rank()).to(dtype)
    poison_on_alloc()
    got = tilelink.allgather_ll(x)
    want = torch.empty((dist.get_world_size(), *shape), dtype=dtype, device="cuda")
    dist.all_gather_into_tensor(want, x)
    assert torch.equal(got.view(torch.uint8), want.view(torch.uint8)), "allgather_ll differs from NCCL's all-gather"


@pytest.mark.parametrize("batch, hq, hkv, d, dtype", [(2, 32, 8, 128, torch.bfloat16), (1, 12, 2, 64, torch.float16)])
def test_flash_decode_matches_sdpa_over_the_whole_cache(world, batch, hq, hkv, d, dtype):
    seed = seed_everyone()
    rank, size = dist.get_rank(), dist.get_world_size()
    lens = [300 + 97 * r for r in range(size)]  # uneven shards
    q = rand((batch, hq, d), dtype, seed)
    k = rand((batch, lens[rank], hkv, d), dtype, seed + 1 + 2 * rank)
    v = rand((batch, lens[rank], hkv, d), dtype, seed + 2 + 2 * rank)
    poison_on_alloc()
    got = tilelink.flash_decode(q, k, v)
    ks = [rand((batch, lens[r], hkv, d), dtype, seed + 1 + 2 * r) for r in range(size)]
    vs = [rand((batch, lens[r], hkv, d), dtype, seed + 2 + 2 * r) for r in range(size)]
    kk = torch.cat(ks, 1).transpose(1, 2).float()
    vv = torch.cat(vs, 1).transpose(1, 2).float()
    want = F.scaled_dot_product_attention(q.float().unsqueeze(2), kk, vv, enable_gqa=True).squeeze(2)
    err = (got.float() - want).abs()
    assert not torch.isnan(got).any()
    assert (err <= 4e-3 + 8e-3 * want.abs()).all(), f"max error {err.max().item():.3e}"


@pytest.mark.parametrize("m, hidden, n, experts, topk, dtype", [(37, 256, 136, 8, 2, torch.bfloat16),
                                                             (64, 128, 384, 60, 4, torch.float16)])
def test_ag_moe_matches_torch_gather_sort_grouped_mm(world, m, hidden, n, experts, topk, dtype):
    seed = seed_everyone()
    rank, size = dist.get_rank(), dist.get_world_size()
    x = rand((m, hidden), dtype, seed + 1 + rank)
    w = rand((experts, n, hidden), dtype, seed + 100 + rank) * hidden ** -0.5
    g = torch.Generator(device="cuda").manual_seed(seed)
    ids = torch.multinomial(torch.ones(size * m, experts, device="cuda"), topk, generator=g).to(torch.int32)
    poison_on_alloc()
    got = tilelink.ag_moe(x, ids, w)
    got_sorted, rows = tilelink.ag_moe(x, ids, w, sorted_layout=True)
    xg = torch.cat(gather(x)).float()
    want = torch.einsum("th,tjnh->tjn", xg, w.float()[ids.long()]).reshape(size * m * topk, n)
    for y, what in ((got, "token order"), (got_sorted[rows.long()], "sorted layout")):
        err = (y.float() - want).abs()
        assert not torch.isnan(y).any(), what
        assert (err <= 2e-2 + 1e-2 * want.abs()).all(), f"{what}: max error {err.max().item():.3e}"


@pytest.mark.parametrize("m, hidden, k_shard, experts, topk, dtype", [(37, 136, 128, 8, 2, torch.bfloat16),
                                                                   (16, 256, 64, 60, 4, torch.float16)])
def test_moe_rs_matches_torch_grouped_sum_reduce_scatter(world, m, hidden, k_shard, experts, topk, dtype):
    seed = seed_everyone()
    rank, size = dist.get_rank(), dist.get_world_size()
    tokens = m * size
    h = rand((tokens * topk, k_shard), dtype, seed + 1 + rank)
    w = rand((experts, hidden, k_shard), dtype, seed + 100 + rank) * k_shard ** -0.5
    g = torch.Generator(device="cuda").manual_seed(seed)
    ids = torch.multinomial(torch.ones(tokens, experts, device="cuda"), topk, generator=g).to(torch.int32)
    wts = torch.rand(tokens, topk, generator=g, device="cuda")
    poison_on_alloc()
    got = tilelink.moe_rs(h, ids, wts, w)
    part = torch.einsum("tjk,tjhk->th", h.float().view(tokens, topk, k_shard) * wts.unsqueeze(-1), w.float()[ids.long()])
    want = torch.stack(gather(part)).sum(0)[rank * m:(rank + 1) * m]
    # The same with h handed over in a shuffled row order, with each entry's row.
    perm = torch.randperm(tokens * topk, generator=g, device="cuda").to(torch.int32)
    h_moved = torch.empty_like(h)
    h_moved[perm.long()] = h
    got_rows = tilelink.moe_rs(h_moved, ids, wts, w, h_rows=perm)
    for y, what in ((got, "token order"), (got_rows, "h_rows")):
        err = (y.float() - want).abs()
        assert not torch.isnan(y).any(), what
        assert (err <= 5e-2 + 2e-2 * want.abs()).all(), f"{what}: max error {err.max().item():.3e}"


@pytest.mark.parametrize("b, sq, skv, hq, hkv, d, dtype, causal", [
    (2, 333, 333, 8, 2, 128, torch.bfloat16, True), (1, 129, 1000, 4, 4, 64, torch.float16, False),
    (3, 1000, 77, 6, 3, 128, torch.float16, True)])
def test_attention_matches_sdpa(world, b, sq, skv, hq, hkv, d, dtype, causal):
    seed = seed_everyone()
    q, k, v = (rand((b, h, s, d), dtype, seed + i) for i, (h, s) in enumerate(((hq, sq), (hkv, skv), (hkv, skv))))
    poison_on_alloc()
    out, lse = tilelink.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=causal)
    qf, kf, vf = q.float(), k.float(), v.float()
    want = F.scaled_dot_product_attention(qf, kf, vf, is_causal=causal, enable_gqa=True).transpose(1, 2)
    scores = torch.einsum("bhgqd,bhkd->bhgqk", qf.view(b, hkv, hq // hkv, sq, d), kf) * d ** -0.5
    if causal:
        scores = scores.masked_fill(torch.ones(sq, skv, dtype=torch.bool, device="cuda").triu(1), float("-inf"))
    want_lse = torch.logsumexp(scores, -1).reshape(b, hq, sq)
    err = (out.float() - want).abs()
    assert not torch.isnan(out).any()
    assert (err <= 1.6e-2 + 1.6e-2 * want.abs()).all(), f"max error {err.max().item():.3e}"
    assert torch.allclose(lse, want_lse, atol=1e-3, rtol=1e-3), (lse - want_lse).abs().max()


@pytest.mark.parametrize("sharding, causal", [("zigzag", True), ("contiguous", True), ("contiguous", False)])
def test_sp_attention_matches_sdpa_over_the_whole_sequence(world, sharding, causal):
    seed = seed_everyone()
    rank, size = dist.get_rank(), dist.get_world_size()
    b, hq, hkv, d, local = 2, 8, 2, 128, 2 * 75
    total = local * size
    q, k, v = (rand((b, total, h, d), torch.bfloat16, seed + i) for i, h in enumerate((hq, hkv, hkv)))
    if sharding == "zigzag":
        c = local // 2
        rows = torch.cat([torch.arange(rank * c, (rank + 1) * c),
                          torch.arange((2 * size - 1 - rank) * c, (2 * size - rank) * c)]).cuda()
    else:
        rows = torch.arange(rank * local, (rank + 1) * local).cuda()
    mine = lambda t: t[:, rows].contiguous()  # noqa: E731
    poison_on_alloc()
    out, lse = tilelink.sp_attention(mine(q), mine(k), mine(v), causal=causal, sharding=sharding)
    qf, kf, vf = (t.transpose(1, 2).float() for t in (q, k, v))
    mask = rows[:, None] >= torch.arange(total, device="cuda")[None, :] if causal else None
    want = F.scaled_dot_product_attention(qf[:, :, rows], kf, vf, attn_mask=mask, enable_gqa=True).transpose(1, 2)
    err = (out.float() - want).abs()
    assert not torch.isnan(out).any()
    assert (err <= 1.6e-2 + 1.6e-2 * want.abs()).all(), f"max error {err.max().item():.3e}"
    assert lse.shape == (b, hq, local)


def test_grouped_mm_matches_torch_grouped_mm(world):
    seed = seed_everyone()
    a = rand((1000, 512), torch.bfloat16, seed)
    b = rand((8, 264, 512), torch.bfloat16, seed + 1)
    offs = torch.tensor([0, 100, 100, 357, 600, 601, 999, 1000], dtype=torch.int32, device="cuda")
    poison_on_alloc()
    got = tilelink.grouped_mm(a, b, offs)
    want = torch._grouped_mm(a, b.transpose(-2, -1), offs=offs)
    assert torch.allclose(got.float(), want.float(), atol=2e-2, rtol=1e-2), (got.float() - want.float()).abs().max()


# Rows, columns and depth from decode-sized to thousands of rows, narrow and deep (one per model
# band of the engine's rule), in both dtypes.
LINEAR_SHAPES = [((1,), 1024, 512), ((37,), 136, 4104), ((2, 300), 2048, 1024), ((5000,), 264, 2056)]


@pytest.mark.parametrize("lead, n, k", LINEAR_SHAPES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_linear_matches_fp32_matmul(world, lead, n, k, dtype):
    seed = seed_everyone()
    x = rand((*lead, k), dtype, seed)
    w = rand((n, k), dtype, seed + 1)
    poison_on_alloc()
    got = tilelink.linear(x, w)
    assert got.shape == (*lead, n) and got.dtype == dtype
    check_close(got, x.float() @ w.float().t(), f"linear {lead} x {n} x {k}")


def test_linear_takes_strided_rows_and_copies_what_it_must(world):
    seed = seed_everyone()
    wide = rand((600, 1000), torch.bfloat16, seed)
    w_wide = rand((264, 520), torch.bfloat16, seed + 1)
    x, w = wide[:, 8:520], w_wide[:, :512]  # rows 1000 and 520 apart, taken as they are
    want = x.float() @ w.float().t()
    poison_on_alloc()
    check_close(torch.ops.tilelink.linear(x, w), want, "strided rows")
    check_close(tilelink.linear(x.t().contiguous().t(), w), want, "column-major x (copied)")
    odd = wide.flatten()[4:4 + 600 * 512].view(600, 512)  # 8 bytes past a 16-byte boundary
    check_close(tilelink.linear(odd, w), odd.float() @ w.float().t(), "misaligned x (copied)")
    assert tilelink.linear(wide[:0, :512], w).shape == (0, 264)
    empty_k = tilelink.linear(wide[:5, :0], w_wide[:, :0])
    assert empty_k.shape == (5, 264) and (empty_k == 0).all()


def test_linear_backward_matches_torch(world):
    seed = seed_everyone()
    x = rand((3, 96, 256), torch.bfloat16, seed).requires_grad_()
    w = rand((384, 256), torch.bfloat16, seed + 1).requires_grad_()
    g = rand((3, 96, 384), torch.bfloat16, seed + 2)
    tilelink.linear(x, w).backward(g)
    x32, w32 = x.detach().float().requires_grad_(), w.detach().float().requires_grad_()
    torch.nn.functional.linear(x32, w32).backward(g.float())
    check_close(x.grad, x32.grad, "dx")
    check_close(w.grad, w32.grad, "dw")


def test_linear_tuning_on_a_file(world, tmp_path):
    seed = seed_everyone()
    shapes = [(700, 1536, 2048), (24, 4096, 1024)]
    was = tilelink.gemm_tuning()
    tilelink.clear_tuned_plans()
    try:
        tilelink.set_gemm_tuning(True)
        assert tilelink.gemm_tuning()
        for i, (m, n, k) in enumerate(shapes):
            x, w = rand((m, k), torch.bfloat16, seed + 2 * i), rand((n, k), torch.bfloat16, seed + 2 * i + 1)
            poison_on_alloc()
            check_close(tilelink.linear(x, w), x.float() @ w.float().t(), f"tuned {m} x {n} x {k}")
        path = tmp_path / f"tuned_{dist.get_rank()}.csv"
        assert tilelink.save_tuned_plans(path) == len(shapes)
        tilelink.clear_tuned_plans()
        assert tilelink.load_tuned_plans(path) == len(shapes)
        m, n, k = shapes[0]
        x, w = rand((m, k), torch.bfloat16, seed + 7), rand((n, k), torch.bfloat16, seed + 8)
        check_close(tilelink.linear(x, w), x.float() @ w.float().t(), "a loaded tuned plan")
        path.write_text("not,a,tuned,line\n")
        with pytest.raises(RuntimeError, match=f"{path.name}:1"):
            tilelink.load_tuned_plans(path)
    finally:
        tilelink.set_gemm_tuning(was)
        tilelink.clear_tuned_plans()


def test_a_timed_out_call_raises_on_every_rank_then_the_world_works(world):
    # Every rank but 0 makes its call 2 s late while rank 0's device waits are bounded at 300 ms:
    # the call is aborted on every rank, each raises (no dead CUDA context), and later calls on
    # the same world give the result of the call before the fault, bitwise.
    import time

    if dist.get_world_size() < 2:
        pytest.skip("needs a peer to wait for")
    rank = dist.get_rank()
    seed = seed_everyone()
    w = tilelink.init(heap_bytes=256 << 20, wait_timeout_ms=300 if rank == 0 else 60000)
    try:
        a = rand((128, 512), torch.bfloat16, seed + rank)
        b = rand((256, 512), torch.bfloat16, seed)
        want = tilelink.ag_gemm(a, b, world=w, path="fused")
        w.check()
        dist.barrier()
        if rank != 0:
            time.sleep(2)
        with pytest.raises(RuntimeError, match="timed out"):
            tilelink.ag_gemm(a, b, world=w, path="fused")
            w.check()
        dist.barrier()
        for _ in range(20):
            got = tilelink.ag_gemm(a, b, world=w, path="fused")
            w.check()
            assert torch.equal(got, want)
    finally:
        w.close()


def test_compiled_block_runs(world):
    # torch.compile over the ops (the fake implementations trace, the real ones run).
    w = world.size
    x = torch.randn(128, 256, device="cuda").bfloat16()
    up = torch.randn(512, 256, device="cuda").bfloat16() / 16
    down = torch.randn(256, 512, device="cuda").bfloat16() / 16

    def block(x):
        return tilelink.gemm_rs(F.silu(tilelink.ag_gemm(x, up)), down)

    got = torch.compile(block, fullgraph=True)(x)
    # Rank q's activation is silu(all of x @ up_q^T); the output sums every rank's h_q @ down_q^T.
    h = F.silu(torch.cat(gather(x)).float() @ up.float().t()).bfloat16()
    parts = [(hq.float() @ dq.float().t()).chunk(w)[dist.get_rank()] for hq, dq in zip(gather(h), gather(down))]
    # h itself is rounded to bf16 on both sides, possibly the other way at a tie: slack for that.
    check_close(got, sum(parts), "compiled ag_gemm -> silu -> gemm_rs", parts, slack=0.05)


def test_backward_is_the_conjugate_collective(world):
    # loss = sum over ranks of <out_r, w_r>; each rank's gradients against a float32 reference
    # built from every rank's tensors. bf16 weights w_r are what autograd feeds the backward.
    seed = seed_everyone()
    r, size = dist.get_rank(), world.size
    m, n, k = 64, 256, 128
    parts_of = lambda xs, ys: [x.float() @ y.float() for x, y in zip(xs, ys)]  # noqa: E731

    # ag_gemm: dA_r = rows r of sum_q w_q B_q, dB_r = w_r^T AG(A)
    a = rand((m, k), torch.bfloat16, seed + r).requires_grad_()
    b = rand((n, k), torch.bfloat16, seed + 100 + r).requires_grad_()
    w = rand((m * size, n), torch.bfloat16, seed + 200 + r)
    (tilelink.ag_gemm(a, b).float() * w.float()).sum().backward()
    parts = [p.chunk(size)[r] for p in parts_of(gather(w), gather(b.detach()))]
    check_close(a.grad, sum(parts), "ag_gemm dA", parts)
    check_close(b.grad, w.float().t() @ torch.cat(gather(a.detach())).float(), "ag_gemm dB")

    # gemm_rs: dA_r = AG(w) B_r, dB_r = AG(w)^T A_r
    a = rand((m * size, k), torch.bfloat16, seed + 300 + r).requires_grad_()
    b = rand((n, k), torch.bfloat16, seed + 400 + r).requires_grad_()
    w = rand((m, n), torch.bfloat16, seed + 500 + r)
    (tilelink.gemm_rs(a, b).float() * w.float()).sum().backward()
    w_all = torch.cat(gather(w)).float()
    check_close(a.grad, w_all @ b.detach().float(), "gemm_rs dA")
    check_close(b.grad, w_all.t() @ a.detach().float(), "gemm_rs dB")

    # gemm_ar: the output (and so its gradient) is the same on every rank: w shared
    a = rand((m, k), torch.bfloat16, seed + 600 + r).requires_grad_()
    b = rand((n, k), torch.bfloat16, seed + 700 + r).requires_grad_()
    w = rand((m, n), torch.bfloat16, seed + 800)
    (tilelink.gemm_ar(a, b).float() * w.float()).sum().backward()
    check_close(a.grad, w.float() @ b.detach().float(), "gemm_ar dA")
    check_close(b.grad, w.float().t() @ a.detach().float(), "gemm_ar dB")
