"""What the Python package does without a GPU: import, fake-tensor shape propagation (the
path torch.compile takes), and argument errors raised before anything is launched."""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

import tilelink

BF16, FP16 = torch.bfloat16, torch.float16
OPS = ("ag_gemm", "gemm_rs", "gemm_ar")


def meta(*shape, dtype=BF16):
    return torch.empty(*shape, dtype=dtype, device="meta")


def test_ops_are_registered():
    for op in OPS:
        assert hasattr(torch.ops.tilelink, op), op
    assert tilelink.__all__ and callable(tilelink.init)


@pytest.mark.parametrize("world_size", [1, 2, 3, 8])
@pytest.mark.parametrize("dtype", [BF16, FP16])
def test_fake_shapes(world_size, dtype):
    m, n, k = 24 * world_size, 136, 72
    with FakeTensorMode():
        a = torch.empty(m, k, dtype=dtype, device="cuda")
        b = torch.empty(n, k, dtype=dtype, device="cuda")
        ag = torch.ops.tilelink.ag_gemm(a, b, 1, world_size, 0)
        rs = torch.ops.tilelink.gemm_rs(a, b, 1, world_size, 0)
        ar = torch.ops.tilelink.gemm_ar(a, b, 1, world_size, 0)
    assert ag.shape == (world_size * m, n) and ag.dtype == dtype and ag.device.type == "cuda"
    assert rs.shape == (m // world_size, n) and rs.dtype == dtype
    assert ar.shape == (m, n) and ar.dtype == dtype


@pytest.mark.parametrize("world_size", [1, 2, 5, 8])
def test_allgather_ll_fake_shape(world_size):
    with FakeTensorMode():
        x = torch.empty(3, 40, dtype=torch.float32, device="cuda")
        out = torch.ops.tilelink.allgather_ll(x, 1, world_size)
    assert out.shape == (world_size, 3, 40) and out.dtype == torch.float32 and out.device.type == "cuda"


@pytest.mark.parametrize("x, message", [
    (meta(3, dtype=torch.int8), "multiple of 8"),
    (meta(0), "multiple of 8"),
    (meta(8 << 20), "at most"),
    (meta(16, 16).t(), "contiguous"),
    (torch.empty(16, dtype=BF16), "CUDA device"),
])
def test_allgather_ll_bad_input_raises_value_error(x, message):
    with pytest.raises(ValueError, match=message):
        torch.ops.tilelink.allgather_ll(x, 1, 2)


def test_flash_decode_fake_shape():
    with FakeTensorMode():
        q = torch.empty(2, 32, 128, dtype=BF16, device="cuda")
        k = torch.empty(2, 1000, 8, 128, dtype=BF16, device="cuda")
        out = torch.ops.tilelink.flash_decode(q, k, k, 0.0, 1, 2)
    assert out.shape == (2, 32, 128) and out.dtype == BF16


@pytest.mark.parametrize("q, k, message", [
    (meta(2, 32, 96), meta(2, 10, 8, 96), "head_dim must be 64 or 128"),
    (meta(2, 30, 128), meta(2, 10, 8, 128), "multiple of kv_heads"),
    (meta(2, 32, 128), meta(3, 10, 8, 128), "batch and head_dim"),
    (meta(2, 32, 128), meta(2, 10, 8, 128, dtype=FP16), "bfloat16 or all float16"),
    (meta(2, 32, 128), meta(2, 10, 128), "kv_len, kv_heads"),
])
def test_flash_decode_bad_input_raises_value_error(q, k, message):
    with pytest.raises(ValueError, match=message):
        torch.ops.tilelink.flash_decode(q, k, k, 0.0, 1, 2)


def test_attention_fake_shapes():
    with FakeTensorMode():
        q = torch.empty(2, 8, 300, 128, dtype=BF16, device="cuda").transpose(1, 2)  # SDPA layout, viewed
        k = torch.empty(2, 2, 77, 128, dtype=BF16, device="cuda").transpose(1, 2)
        out, lse = tilelink.attention(q, k, k, causal=True)
    assert out.shape == (2, 300, 8, 128) and out.dtype == BF16
    assert lse.shape == (2, 8, 300) and lse.dtype == torch.float32


@pytest.mark.parametrize("q, k, message", [
    (meta(2, 10, 8, 96), meta(2, 10, 8, 96), "head_dim must be 64 or 128"),
    (meta(2, 10, 6, 128), meta(2, 10, 4, 128), "multiple of kv_heads"),
    (meta(2, 10, 8, 128), meta(3, 10, 8, 128), "batch and head_dim"),
    (meta(2, 10, 8, 128), meta(2, 10, 8, 128, dtype=FP16), "bfloat16 or all float16"),
    (meta(2, 10, 8, 128), meta(2, 8, 128), "kv_len, kv_heads"),
    (meta(2, 10, 8, 256)[..., ::2], meta(2, 10, 8, 128), "head_dim contiguous"),
])
def test_attention_bad_input_raises_value_error(q, k, message):
    with pytest.raises(ValueError, match=message):
        tilelink.attention(q, k, k)


def test_sp_attention_fake_shapes_and_errors():
    with FakeTensorMode():
        q = torch.empty(2, 300, 8, 128, dtype=BF16, device="cuda")
        k = torch.empty(2, 300, 2, 128, dtype=BF16, device="cuda")
        out, lse = torch.ops.tilelink.sp_attention(q, k, k, True, 1, 0.0, 1, 2, 0)
    assert out.shape == (2, 300, 8, 128) and lse.shape == (2, 8, 300)
    with pytest.raises(ValueError, match="must be even"):
        torch.ops.tilelink.sp_attention(meta(1, 33, 2, 128), meta(1, 33, 1, 128), meta(1, 33, 1, 128), True, 1, 0.0,
                                        1, 2, 0)
    with pytest.raises(ValueError, match="same tokens"):
        torch.ops.tilelink.sp_attention(meta(1, 32, 2, 128), meta(1, 30, 1, 128), meta(1, 30, 1, 128), True, 0, 0.0,
                                        1, 2, 0)


@pytest.mark.parametrize("world_size", [1, 3, 8])
def test_ag_moe_fake_shapes(world_size):
    with FakeTensorMode():
        x = torch.empty(5, 64, dtype=BF16, device="cuda")
        ids = torch.empty(5 * world_size, 2, dtype=torch.int32, device="cuda")
        w = torch.empty(8, 24, 64, dtype=BF16, device="cuda")
        y, rows = torch.ops.tilelink.ag_moe(x, ids, w, 1, world_size, 0, False)
        ys, rows_s = torch.ops.tilelink.ag_moe(x, ids, w, 1, world_size, 0, True)
        g = torch.ops.tilelink.grouped_mm(torch.empty(100, 64, dtype=BF16, device="cuda"), w,
                                          torch.empty(8, dtype=torch.int32, device="cuda"))
    assert y.shape == (5 * world_size * 2, 24) and y.dtype == BF16 and rows.shape == (0,)
    assert ys.shape == y.shape and rows_s.shape == (5 * world_size * 2,) and rows_s.dtype == torch.int32
    assert g.shape == (100, 24)


@pytest.mark.parametrize("x, ids, w, message", [
    (meta(5, 64), meta(10, 2, dtype=torch.int64), meta(8, 24, 64), "int32"),
    (meta(5, 64), meta(10, 9, dtype=torch.int32), meta(8, 24, 64), "topk <= experts"),
    (meta(5, 64), meta(11, 2, dtype=torch.int32), meta(8, 24, 64), "gathered tokens"),
    (meta(5, 60), meta(10, 2, dtype=torch.int32), meta(8, 24, 60), "multiples of 8"),
    (meta(5, 64), meta(10, 2, dtype=torch.int32), meta(8, 24, 32), "hidden size"),
    (meta(5, 64), meta(10, 2, dtype=torch.int32), meta(8, 24, 64, dtype=FP16), "must both be bfloat16"),
])
def test_ag_moe_bad_input_raises_value_error(x, ids, w, message):
    with pytest.raises(ValueError, match=message):
        torch.ops.tilelink.ag_moe(x, ids, w, 1, 2, 0, False)


@pytest.mark.parametrize("world_size", [1, 2, 4])
def test_moe_rs_fake_shape(world_size):
    with FakeTensorMode():
        h = torch.empty(16 * 2, 64, dtype=FP16, device="cuda")
        ids = torch.empty(16, 2, dtype=torch.int32, device="cuda")
        wts = torch.empty(16, 2, dtype=torch.float32, device="cuda")
        w = torch.empty(8, 128, 64, dtype=FP16, device="cuda")
        out = torch.ops.tilelink.moe_rs(h, ids, wts, w, None, 1, world_size, 0)
    assert out.shape == (16 // world_size, 128) and out.dtype == FP16


@pytest.mark.parametrize("h, wts, message", [
    (meta(32, 64), meta(16, 2, dtype=BF16), "float32"),
    (meta(30, 64), meta(16, 2, dtype=torch.float32), "tokens \\* topk"),
    (meta(32, 60), meta(16, 2, dtype=torch.float32), "k_shard"),
])
def test_moe_rs_bad_input_raises_value_error(h, wts, message):
    with pytest.raises(ValueError, match=message):
        torch.ops.tilelink.moe_rs(h, meta(16, 2, dtype=torch.int32), wts, meta(8, 128, 64), None, 1, 2, 0)


def test_traced_graph_keeps_the_ops():
    # A tensor-parallel MLP block: the ops must appear as single nodes with the right shapes.
    def mlp(x, w_up, w_down):
        h = torch.ops.tilelink.ag_gemm(x, w_up, 7, 4, 1)
        return torch.ops.tilelink.gemm_rs(torch.nn.functional.silu(h), w_down, 7, 4, 1)

    g = make_fx(mlp, tracing_mode="fake")(meta(32, 64), meta(256, 64), meta(64, 256))
    code = g.code
    assert "torch.ops.tilelink.ag_gemm.default" in code and "torch.ops.tilelink.gemm_rs.default" in code
    out = [n for n in g.graph.nodes if n.op == "call_function" and "gemm_rs" in str(n.target)][0]
    assert tuple(out.meta["val"].shape) == (128 // 4, 64)


def test_compile_traces_without_graph_breaks():
    fn = torch.compile(lambda x, w: torch.ops.tilelink.gemm_ar(x, w, 1, 2, 0) * 2, backend="eager", fullgraph=True)
    assert fn(meta(16, 64), meta(128, 64)).shape == (16, 128)


@pytest.mark.parametrize(
    "a, b, message",
    [
        (meta(16, 64, dtype=torch.float32), meta(128, 64, dtype=torch.float32), "bfloat16 or both float16"),
        (meta(16, 64), meta(128, 64, dtype=FP16), "bfloat16 or both float16"),
        (meta(16, 64, 2), meta(128, 64), "must be 2-D"),
        (meta(16, 64), meta(128, 72), "k differs"),
        (meta(16, 60), meta(128, 60), "multiples of 8"),
        (meta(16, 64), meta(100, 64), "multiples of 8"),
        (meta(64, 16).t(), meta(128, 64), "contiguous"),
        (torch.zeros(16, 64, dtype=BF16), torch.zeros(128, 64, dtype=BF16), "CUDA device"),
    ],
)
@pytest.mark.parametrize("op", OPS)
def test_bad_operands_raise_value_error(op, a, b, message):
    with pytest.raises(ValueError, match=message):
        getattr(torch.ops.tilelink, op)(a, b, 1, 2, 0)


def test_rows_must_divide_for_reduce_scatter():
    with pytest.raises(ValueError, match="divisible by the world size 3"):
        torch.ops.tilelink.gemm_rs(meta(16, 64), meta(128, 64), 1, 3, 0)


def test_public_functions_need_a_world():
    with pytest.raises(RuntimeError, match="tilelink.init"):
        tilelink.ag_gemm(meta(16, 64), meta(128, 64))


def test_bad_path_names_the_choices():
    class OneRank:
        id, size = 1, 1

    with pytest.raises(ValueError, match="auto"):
        tilelink.gemm_ar(meta(16, 64), meta(128, 64), world=OneRank(), path="overlapped")


def test_init_needs_torch_distributed():
    with pytest.raises(RuntimeError, match="init_process_group"):
        tilelink.init()


def test_init_refuses_an_unknown_transport():
    with pytest.raises(ValueError, match="transport='ipc'.*cuda_ipc.*nvshmem"):
        tilelink.init(transport="ipc")


@pytest.mark.parametrize("world_size", [1, 2, 4])
def test_backward_shapes(world_size):
    # The backward of each op on meta tensors: the conjugate collective GEMMs must accept the
    # gradients' shapes and return gradients shaped like the inputs.
    m, n, k = 16 * world_size, 136, 72
    a = meta(m, k).requires_grad_()
    b = meta(n, k).requires_grad_()
    outs = {
        "ag_gemm": torch.ops.tilelink.ag_gemm_gathered(a, b, 1, world_size, 0)[0],
        "gemm_rs": torch.ops.tilelink.gemm_rs(a, b, 1, world_size, 0),
        "gemm_ar": torch.ops.tilelink.gemm_ar(a, b, 1, world_size, 0),
    }
    for op, out in outs.items():
        ga, gb = torch.autograd.grad(out.sum(), (a, b))
        assert ga.shape == a.shape and gb.shape == b.shape, op


def test_backward_values_on_one_rank(monkeypatch):
    # With one rank every op is a @ b.T, so each gradient must be plain matmul's: run the real
    # implementations on the CPU with a host GEMM standing in for the library.
    import tilelink._ops as ops

    def host_gemm(op, world_id, a, b, c, path, gathered=None):
        c.copy_((a.float() @ b.float().t()).to(c.dtype))
        if gathered is not None:
            gathered.copy_(a)

    monkeypatch.setattr(ops, "_DEVICE_TYPES", ("cpu",))
    monkeypatch.setattr(ops, "_launch", host_gemm)
    g = torch.Generator().manual_seed(7)
    a0 = torch.randn(32, 64, generator=g).to(BF16)
    b0 = torch.randn(48, 64, generator=g).to(BF16)
    w = torch.randn(32, 48, generator=g)
    ref_a, ref_b = a0.float().requires_grad_(), b0.float().requires_grad_()
    ((ref_a @ ref_b.t()) * w).sum().backward()
    for op in ("ag_gemm_gathered", "gemm_rs", "gemm_ar"):
        a, b = a0.clone().requires_grad_(), b0.clone().requires_grad_()
        out = getattr(torch.ops.tilelink, op)(a, b, 1, 1, 0)
        out = out[0] if isinstance(out, tuple) else out
        (out.float() * w).sum().backward()
        for got, want, name in ((a.grad, ref_a.grad, "dA"), (b.grad, ref_b.grad, "dB")):
            err = (got.float() - want).abs().max().item()
            assert err <= 2**-7 * want.abs().max().item() + 1e-2, f"{op} {name}: off by {err}"


def test_a_library_that_cannot_load_says_why():
    # On a machine without the NVIDIA driver (CI) loading fails; the error must be tilelink's,
    # naming the library and the reason, not a bare OSError from ctypes.
    import tilelink._capi as capi

    try:
        capi.lib()
    except RuntimeError as e:
        assert "tilelink" in str(e) and ("cannot load" in str(e) or "not found" in str(e)), str(e)


# ---- the plain GEMM -----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [BF16, FP16])
def test_linear_fake_shapes(dtype):
    with FakeTensorMode():
        x = torch.empty(2, 37, 72, dtype=dtype, device="cuda")
        w = torch.empty(136, 72, dtype=dtype, device="cuda")
        y = tilelink.linear(x, w)
        wide = torch.empty(37, 200, dtype=dtype, device="cuda")
        z = torch.ops.tilelink.linear(wide[:, :72], w)  # rows 200 apart: taken as they are
    assert y.shape == (2, 37, 136) and y.dtype == dtype and y.device.type == "cuda"
    assert z.shape == (37, 136)
    assert tilelink.linear(meta(5, 0), meta(16, 0)).shape == (5, 16)


@pytest.mark.parametrize("a, b, message", [
    (meta(16, 64, dtype=torch.float32), meta(128, 64, dtype=torch.float32), "bfloat16 or both float16"),
    (meta(16, 64), meta(128, 64, dtype=FP16), "bfloat16 or both float16"),
    (meta(16, 64), meta(128, 72), "must be \\[n, k\\]"),
    (meta(16, 60), meta(128, 60), "multiples of 8"),
    (meta(16, 64), meta(100, 64), "multiples of 8"),
    (meta(64, 16).t(), meta(128, 64), "rows must be contiguous"),
    (meta(16, 100)[:, :64], meta(128, 64), "rows must be contiguous"),
    (meta(64, 16).t()[:1], meta(128, 64), "rows must be contiguous"),  # one row, its columns strided
    (torch.zeros(16, 64, dtype=BF16), torch.zeros(128, 64, dtype=BF16), "CUDA device"),
])
def test_linear_op_bad_operands_raise_value_error(a, b, message):
    with pytest.raises(ValueError, match=message):
        torch.ops.tilelink.linear(a, b)


def test_linear_copies_operands_whose_rows_do_not_qualify():
    # A transposed or oddly strided input is made contiguous before the op sees it.
    traced = make_fx(lambda x, w: tilelink.linear(x, w), tracing_mode="fake")(meta(64, 16).t(), meta(128, 64))
    assert "torch.ops.tilelink.linear.default" in traced.code
    with pytest.raises(ValueError, match="x must be"):
        tilelink.linear(meta(16, 32), meta(128, 64))
    with pytest.raises(ValueError, match="weight must be"):
        tilelink.linear(meta(16, 64), meta(2, 128, 64))


def test_linear_compiles_without_graph_breaks():
    fn = torch.compile(lambda x, w: tilelink.linear(x, w).relu(), backend="eager", fullgraph=True)
    assert fn(meta(4, 16, 64), meta(128, 64)).shape == (4, 16, 128)


def test_gemm_tuning_switch_and_files_through_the_c_api(tmp_path):
    # Host-only parts of the C API's plain-GEMM calls (where the library loads without a GPU).
    import tilelink._capi as capi

    try:
        capi.lib()
    except RuntimeError as e:
        pytest.skip(str(e))
    was = tilelink.gemm_tuning()
    try:
        tilelink.set_gemm_tuning(True)
        assert tilelink.gemm_tuning()
        tilelink.set_gemm_tuning(False)
        assert not tilelink.gemm_tuning()
    finally:
        tilelink.set_gemm_tuning(was)
    tilelink.clear_tuned_plans()
    assert tilelink.save_tuned_plans(tmp_path / "none.csv") == 0
    bad = tmp_path / "bad.csv"
    bad.write_text("# a comment\nNVIDIA H200:132,bf16,1000,1376,oops\n")
    with pytest.raises(RuntimeError, match="bad.csv:2"):
        tilelink.load_tuned_plans(bad)
    with pytest.raises(RuntimeError, match="cannot read"):
        tilelink.load_tuned_plans(tmp_path / "missing.csv")
