// src/ops/flash_decode/flash_decode.cu — see tilelink/ops/flash_decode/flash_decode.hpp.
//
// One call: decode_partial_mma_kernel over this rank's shard (chunks in parallel), combine_kernel
// folding the chunks into this rank's partial result (fp32 output and base-2 log-sum-exp, packed
// for the gather), allgather_ll of the packed partials, combine_kernel folding the ranks into the
// output; with one rank the chunks fold straight into the output (two launches). The workspace
// is this rank's own device memory (nothing of it is read by peers: the gather has its own
// symmetric buffers).
#include "tilelink/ops/flash_decode/flash_decode.hpp"

#include <algorithm>
#include <cmath>

#include "ops/allgather_ll/allgather_ll_call.hpp"
#include "ops/common/op_call.hpp"
#include "ops/common/uniform_check.hpp"
#include "ops/flash_decode/decode_kernels.cuh"
#include "ops/flash_decode/decode_mma.cuh"
#include "tilelink/core/kernel_smem.hpp"
#include "tilelink/gemm/gemm.hpp"

namespace tilelink {
namespace {

constexpr const char* kOp = "flash_decode";
constexpr int64_t kMinChunk = 256;  // tokens per chunk, at least: short shards are not over-split

// The workspace grows in stream order (cudaFreeAsync, cudaMallocAsync): cudaFree waits for the
// whole device, and on a GPU shared with peers of this world their kernels of this very call may
// be spinning on signals this rank has not launched yet.
struct FlashDecodeState {
  explicit FlashDecodeState(Context& ctx) : owner_stream(ctx.stream()) {}
  ~FlashDecodeState() {
    if (workspace != nullptr) cudaFreeAsync(workspace, owner_stream);  // the context syncs it next
  }
  ops::UniformCheck uniform;
  cudaStream_t owner_stream;
  float* workspace = nullptr;
  size_t workspace_bytes = 0;
};

void validate(const Context& ctx, const FlashDecodeArgs& a, const FlashDecodeOptions& o) {
  TL_REQUIRE(a.dtype == DType::bf16 || a.dtype == DType::fp16, kOp, ": unsupported dtype");
  TL_REQUIRE(a.batch >= 1 && a.q_heads >= 1 && a.kv_heads >= 1, kOp, ": batch, q_heads, kv_heads must be positive "
             "(got ", a.batch, ", ", a.q_heads, ", ", a.kv_heads, ")");
  TL_REQUIRE(a.head_dim == 64 || a.head_dim == 128, kOp, ": head_dim must be 64 or 128 (got ", a.head_dim, ")");
  TL_REQUIRE(a.q_heads % a.kv_heads == 0 && a.q_heads / a.kv_heads <= 16, kOp, ": q_heads (", a.q_heads,
             ") must be a multiple of kv_heads (", a.kv_heads, ") with at most 16 query heads per kv head");
  TL_REQUIRE(a.kv_len >= 0, kOp, ": kv_len must be >= 0 (got ", a.kv_len, ", rank ", ctx.rank(), ")");
  TL_REQUIRE(a.q != nullptr && a.out != nullptr, kOp, ": q and out must be device pointers (rank ", ctx.rank(), ")");
  TL_REQUIRE(a.kv_len == 0 || (a.k != nullptr && a.v != nullptr), kOp, ": k and v must be device pointers (rank ",
             ctx.rank(), ")");
  TL_REQUIRE(reinterpret_cast<uintptr_t>(a.k) % 16 == 0 && reinterpret_cast<uintptr_t>(a.v) % 16 == 0, kOp,
             ": k and v must be 16-byte aligned");
  TL_REQUIRE(a.scale >= 0.0f && std::isfinite(a.scale), kOp, ": scale must be finite and >= 0 (0: 1/sqrt(head_dim))");
  TL_REQUIRE(a.batch * a.q_heads * (a.head_dim + 1) * 4 <= kAllgatherLlMaxBytes, kOp, ": batch x q_heads = ",
             a.batch * a.q_heads, " partial rows are more than the low-latency gather carries");
  TL_REQUIRE(o.splits >= 0, kOp, ": splits must be >= 0");
}

// The partial kernel needs more than 48 KiB of shared memory (core/kernel_smem.hpp): allowed on
// every device a Context is made on, and at a launch on a device that was not prepared. Allowing
// it once per process left an in-process rank on a second GPU launching with no permission
// (cudaErrorInvalidValue).
template <class T, int D>
void allow_partial_smem(int device) {
  tilelink::detail::allow_dynamic_smem<ops::decode::decode_partial_mma_kernel<T, D>>(
      device, int(sizeof(ops::decode::MmaSmem<D>)));
}

void allow_partial_smem_every_kernel(int device) {
  allow_partial_smem<__nv_bfloat16, 64>(device);
  allow_partial_smem<__nv_bfloat16, 128>(device);
  allow_partial_smem<__half, 64>(device);
  allow_partial_smem<__half, 128>(device);
}
[[maybe_unused]] const bool partial_setup_registered =
    gemm::detail::register_kernel_setup(&allow_partial_smem_every_kernel);

template <class T, int D>
void launch_partial(const ops::decode::PartialParams& p, int splits, int kv_heads, int batch, cudaStream_t s) {
  int device = 0;
  TL_CUDA_CHECK(cudaGetDevice(&device));
  allow_partial_smem<T, D>(device);
  ops::decode::decode_partial_mma_kernel<T, D>
      <<<dim3(splits, kv_heads, batch), ops::decode::kMmaThreads, int(sizeof(ops::decode::MmaSmem<D>)), s>>>(p);
}

template <class T>
void launch_partial_t(const ops::decode::PartialParams& p, int d, int splits, int kv_heads, int batch, cudaStream_t s) {
  if (d == 64) launch_partial<T, 64>(p, splits, kv_heads, batch, s);
  else launch_partial<T, 128>(p, splits, kv_heads, batch, s);
}

// Chunks per (sequence, kv head): about four blocks per SM of this rank's share, never chunks
// shorter than kMinChunk tokens.
int choose_splits(const Context& ctx, const FlashDecodeArgs& a) {
  const int64_t blocks_per_split = a.batch * a.kv_heads;
  const int64_t want = std::max<int64_t>(1, (4 * ctx.sm_count() + blocks_per_split - 1) / blocks_per_split);
  const int64_t most = std::max<int64_t>(1, (a.kv_len + kMinChunk - 1) / kMinChunk);
  return int(std::min(want, most));
}

void flash_decode_enqueue(Context& ctx, const FlashDecodeArgs& a, const FlashDecodeOptions& o, cudaStream_t stream) {
  validate(ctx, a, o);
  auto& st = ctx.op_state<FlashDecodeState>(kOp);
  st.uniform.require(ctx, kOp,
                     {{"batch", a.batch}, {"q_heads", a.q_heads}, {"kv_heads", a.kv_heads}, {"head_dim", a.head_dim},
                      {"dtype", int64_t(a.dtype)}});
  const int64_t rows = a.batch * a.q_heads, d = a.head_dim;
  const int splits = o.splits > 0 ? o.splits : choose_splits(ctx, a);
  const int64_t chunk = (std::max<int64_t>(a.kv_len, 1) + splits - 1) / splits;
  // Workspace: the chunks' partials, then this rank's packed partial (output rows, then the lse
  // rows padded to an even count: the gather moves 8-byte granules), then the gathered partials.
  const int64_t packed = rows * d + (rows + 1) / 2 * 2;
  const int w = ctx.num_ranks();
  const size_t floats = size_t(splits * rows * (d + 1) + packed * (1 + w));
  if (floats * sizeof(float) > st.workspace_bytes) {
    ctx.refuse_in_capture("allocate its workspace (make one call of this size before capturing)");
    if (st.workspace != nullptr) TL_CUDA_CHECK(cudaFreeAsync(st.workspace, stream));  // after the last call's use
    st.workspace = nullptr;
    st.workspace_bytes = 0;
    TL_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&st.workspace), floats * sizeof(float), stream));
    st.workspace_bytes = floats * sizeof(float);
  }
  float* part_o = st.workspace;
  float* part_lse = part_o + splits * rows * d;
  float* mine = part_lse + splits * rows;
  float* gathered = mine + packed;

  ops::decode::PartialParams p{a.q, a.k, a.v, part_o, part_lse, a.kv_len, chunk, int(a.batch), int(a.q_heads),
                               int(a.kv_heads), int(a.q_heads / a.kv_heads),
                               (a.scale > 0.0f ? a.scale : 1.0f / std::sqrt(float(d))) * 1.4426950408889634f};
  if (a.dtype == DType::bf16) launch_partial_t<__nv_bfloat16>(p, int(d), splits, int(a.kv_heads), int(a.batch), stream);
  else launch_partial_t<__half>(p, int(d), splits, int(a.kv_heads), int(a.batch), stream);
  TL_CUDA_CHECK(cudaGetLastError());
  if (w == 1) {
    // Nothing to exchange: the chunks fold straight into the output.
    ctx.begin_op(kOp);
    if (a.dtype == DType::bf16)
      ops::decode::combine_kernel<__nv_bfloat16><<<unsigned(rows), unsigned(d), 0, stream>>>(
          part_o, part_lse, splits, rows * d, rows, int(d), static_cast<__nv_bfloat16*>(a.out), nullptr);
    else
      ops::decode::combine_kernel<__half><<<unsigned(rows), unsigned(d), 0, stream>>>(
          part_o, part_lse, splits, rows * d, rows, int(d), static_cast<__half*>(a.out), nullptr);
    TL_CUDA_CHECK(cudaGetLastError());
    ctx.trace("launched");
    return;
  }
  ops::decode::combine_kernel<float><<<unsigned(rows), unsigned(d), 0, stream>>>(
      part_o, part_lse, splits, rows * d, rows, int(d), mine, mine + rows * d);
  TL_CUDA_CHECK(cudaGetLastError());
  AllgatherLlOptions gather;
  ops::enqueue_allgather_ll(ctx, kOp, {mine, gathered, int64_t(packed * sizeof(float))}, gather, stream);
  if (a.dtype == DType::bf16)
    ops::decode::combine_kernel<__nv_bfloat16><<<unsigned(rows), unsigned(d), 0, stream>>>(
        gathered, gathered + rows * d, w, packed, packed, int(d), static_cast<__nv_bfloat16*>(a.out), nullptr);
  else
    ops::decode::combine_kernel<__half><<<unsigned(rows), unsigned(d), 0, stream>>>(
        gathered, gathered + rows * d, w, packed, packed, int(d), static_cast<__half*>(a.out), nullptr);
  TL_CUDA_CHECK(cudaGetLastError());
  ctx.trace("launched");
}

}  // namespace

void flash_decode(Context& ctx, const FlashDecodeArgs& a, const FlashDecodeOptions& o) {
  ops::run_op_call(ctx, kOp, o.stream, [&](cudaStream_t stream) { flash_decode_enqueue(ctx, a, o, stream); });
}

}  // namespace tilelink
