// src/attention/attention.cpp — argument checks and the plain (one-GPU) attention call.
#include "tilelink/attention/attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tilelink/attention/fmha_problem.hpp"
#include "tilelink/gemm/gemm.hpp"

namespace tilelink {
namespace attention {
namespace {

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

void check_strides(const int64_t (&s)[3], const char* op, const char* name) {
  for (int i = 0; i < 3; ++i)
    TL_REQUIRE(s[i] > 0 && s[i] % 8 == 0 && s[i] < (int64_t(1) << 36), op, ": ", name,
               " strides (batch, row, head) must be positive multiples of 8 elements (16 bytes), got (", s[0],
               ", ", s[1], ", ", s[2], ")");
}

void check_segments(const Segment* seg, int n, int most, int64_t rows, const char* op, const char* name) {
  TL_REQUIRE(n >= 0 && n <= most, op, ": ", n, " ", name, " segments (at most ", most, ")");
  for (int i = 0; i < n; ++i)
    TL_REQUIRE(seg[i].rows >= 0 && seg[i].row >= 0 && seg[i].row + seg[i].rows <= rows, op, ": ", name,
               " segment ", i, " (rows ", seg[i].row, " .. ", seg[i].row + seg[i].rows, ") is outside the ", rows,
               " rows of its tensor");
}

}  // namespace

int64_t query_tiles(const FmhaProblem& p) {
  int64_t tiles = 0;
  for (int s = 0; s < p.q_segments; ++s) tiles += (p.q_segment[s].rows + kBlockM - 1) / kBlockM;
  return tiles;
}

int kv_splits_for(int64_t work, int64_t kv_tiles, int sms, bool causal) {
  if (work <= 0 || sms <= 0 || (causal && work >= sms)) return 1;
  const int64_t most = std::min<int64_t>({kMaxKvSplits, kv_tiles / kMinKvTilesPerSplit, kMaxUnitsPerSm * sms / work});
  auto cost = [&](int64_t s) { return double((work * s + sms - 1) / sms) / double(s); };
  double least = cost(1);
  for (int64_t s = 2; s <= most; ++s) least = std::min(least, cost(s));
  for (int64_t s = 1; s <= most; ++s)
    if (cost(s) <= least * 1.05) return int(s);
  return 1;
}

int64_t partial_lse_bytes(const FmhaProblem& p) {
  return int64_t(p.kv_splits) * p.batch * p.q_heads * p.q_rows * int64_t(sizeof(float));
}

int64_t partial_o_bytes(const FmhaProblem& p) { return partial_lse_bytes(p) * p.head_dim; }

void check_problem(const FmhaProblem& p, const char* op) {
  TL_REQUIRE(p.dtype == DType::bf16 || p.dtype == DType::fp16, op, ": unsupported dtype");
  TL_REQUIRE(p.head_dim == 64 || p.head_dim == 128, op, ": head_dim must be 64 or 128 (got ", p.head_dim, ")");
  TL_REQUIRE(p.batch >= 1 && p.batch <= 65535, op, ": batch must be in 1 .. 65535 (got ", p.batch, ")");
  TL_REQUIRE(p.q_heads >= 1 && p.kv_heads >= 1 && p.q_heads <= 65535, op,
             ": q_heads (1 .. 65535) and kv_heads must be positive (got ", p.q_heads, ", ", p.kv_heads, ")");
  TL_REQUIRE(p.q_heads % p.kv_heads == 0, op, ": q_heads (", p.q_heads, ") must be a multiple of kv_heads (",
             p.kv_heads, ")");
  TL_REQUIRE(p.q_rows >= 0 && p.kv_rows >= 0 && p.q_rows < (int64_t(1) << 31) && p.kv_rows < (int64_t(1) << 31), op,
             ": sequence lengths must be in 0 .. 2^31 - 1 (got ", p.q_rows, ", ", p.kv_rows, ")");
  TL_REQUIRE(std::isfinite(p.scale) && p.scale > 0.0f, op, ": scale must be finite and > 0 (0 asks for 1/sqrt(head_dim))");
  check_segments(p.q_segment, p.q_segments, kMaxQuerySegments, p.q_rows, op, "query");
  check_segments(p.kv_segment, p.kv_segments, kMaxKvSegments, p.kv_rows, op, "key");
  TL_REQUIRE(query_tiles(p) < (int64_t(1) << 31), op, ": too many query rows");
  TL_REQUIRE(p.kv_splits >= 1 && p.kv_splits <= kMaxKvSplits, op, ": kv_splits must be in 1 .. ", kMaxKvSplits,
             " (got ", p.kv_splits, ")");
  if (p.kv_splits > 1) {
    TL_REQUIRE(p.partial_o != nullptr && p.partial_lse != nullptr && aligned16(p.partial_o), op,
               ": a split over the keys needs its fp32 workspaces (partial_o 16-byte aligned)");
    // The merge writes every query row of the tensor.
    TL_REQUIRE(p.q_segments == 1 && p.q_segment[0].row == 0 && p.q_segment[0].rows == p.q_rows, op,
               ": a split over the keys needs one query segment covering all rows");
  }
  if (p.q_rows > 0) {
    TL_REQUIRE(p.q != nullptr && p.o != nullptr, op, ": q and out must be device pointers");
    TL_REQUIRE(aligned16(p.q) && aligned16(p.o), op, ": q and out must be 16-byte aligned");
    TL_REQUIRE(reinterpret_cast<uintptr_t>(p.lse) % 4 == 0, op, ": lse must be 4-byte aligned");
    check_strides(p.q_stride, op, "q");
    check_strides(p.o_stride, op, "out");
  }
  if (p.kv_rows > 0) {
    TL_REQUIRE(p.k != nullptr && p.v != nullptr, op, ": k and v must be device pointers");
    TL_REQUIRE(aligned16(p.k) && aligned16(p.v), op, ": k and v must be 16-byte aligned");
    check_strides(p.k_stride, op, "k");
    check_strides(p.v_stride, op, "v");
  }
}

}  // namespace attention

namespace {

void resolve_strides(const AttentionStrides& given, int64_t rows, int64_t heads, int64_t d, int64_t (&out)[3]) {
  if (given.batch == 0 && given.row == 0 && given.head == 0) {
    out[0] = rows * heads * d;
    out[1] = heads * d;
    out[2] = d;
  } else {
    out[0] = given.batch;
    out[1] = given.row;
    out[2] = given.head;
  }
}

}  // namespace

void attention_forward(const AttentionArgs& a, cudaStream_t stream) {
  constexpr const char* kOp = "attention_forward";
  TL_REQUIRE(a.q_len >= 0 && a.kv_len >= 0, kOp, ": q_len and kv_len must be >= 0 (got ", a.q_len, ", ", a.kv_len, ")");
  TL_REQUIRE(a.scale >= 0.0f && std::isfinite(a.scale), kOp, ": scale must be finite and >= 0 (0: 1/sqrt(head_dim))");
  attention::FmhaProblem p;
  p.dtype = a.dtype;
  p.q = a.q;
  p.k = a.k;
  p.v = a.v;
  p.o = a.out;
  p.lse = a.lse;
  p.batch = a.batch;
  p.q_rows = a.q_len;
  p.kv_rows = a.kv_len;
  p.q_heads = a.q_heads;
  p.kv_heads = a.kv_heads;
  p.head_dim = a.head_dim;
  const int64_t d = a.head_dim;
  resolve_strides(a.q_stride, a.q_len, a.q_heads, d, p.q_stride);
  resolve_strides(a.k_stride, a.kv_len, a.kv_heads, d, p.k_stride);
  resolve_strides(a.v_stride, a.kv_len, a.kv_heads, d, p.v_stride);
  resolve_strides(a.out_stride, a.q_len, a.q_heads, d, p.o_stride);
  p.causal = a.causal;
  p.scale = a.scale > 0.0f ? a.scale : 1.0f / std::sqrt(float(d > 0 ? d : 1));
  p.q_segments = 1;
  p.q_segment[0] = {0, a.q_len, a.causal ? a.q_position0 : 0};
  p.kv_segments = a.kv_len > 0 ? 1 : 0;
  p.kv_segment[0] = {0, a.kv_len, 0};
  attention::check_problem(p, kOp);
  // Few work items and long keys: split the keys (the partial results go to stream-ordered
  // workspaces, freed on the stream after the merge).
  int device = 0;
  TL_CUDA_CHECK(cudaGetDevice(&device));
  const int64_t work = attention::query_tiles(p) * p.q_heads * p.batch;
  // The keys the longest item sees: with a causal mask, up to the last query's position.
  const int64_t visible = a.causal ? std::clamp<int64_t>(a.q_position0 + a.q_len, 0, a.kv_len) : a.kv_len;
  p.kv_splits = attention::kv_splits_for(work, (visible + attention::kBlockN - 1) / attention::kBlockN,
                                         gemm::detail::device_sm_count(device), p.causal);
  if (p.kv_splits == 1) {
    attention::launch_fmha(p, attention::NoKvWait{}, stream);
    return;
  }
  void* workspace = nullptr;
  const int64_t o_bytes = attention::partial_o_bytes(p);
  TL_CUDA_CHECK(cudaMallocAsync(&workspace, size_t(o_bytes + attention::partial_lse_bytes(p)), stream));
  p.partial_o = static_cast<float*>(workspace);
  p.partial_lse = reinterpret_cast<float*>(static_cast<char*>(workspace) + o_bytes);
  try {
    attention::launch_fmha(p, attention::NoKvWait{}, stream);
  } catch (...) {
    cudaFreeAsync(workspace, stream);
    throw;
  }
  TL_CUDA_CHECK(cudaFreeAsync(workspace, stream));
}

}  // namespace tilelink
