// tests/gpu/attention/attention_test.cu — attention_forward against an fp32 reference.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpu/attention/reference.cuh"
#include "gpu/common/gpu_test.hpp"
#include "tilelink/attention/attention.hpp"
#include "tilelink/testing/check.hpp"

namespace tilelink::test {
namespace {

struct Case {
  int64_t batch, q_len, kv_len, q_heads, kv_heads;
  bool causal;
  int64_t q_position0;
  bool heads_major;  // q, k, v as [batch, heads, rows, head_dim]; out with padded heads
  float scale;       // 0: 1/sqrt(head_dim)
};

std::string describe(const Case& c, DType dt, int d) {
  return std::string(dtype_name(dt)) + " d" + std::to_string(d) + " b" + std::to_string(c.batch) + " q" +
         std::to_string(c.q_len) + " kv" + std::to_string(c.kv_len) + " h" + std::to_string(c.q_heads) + "/" +
         std::to_string(c.kv_heads) + (c.causal ? " causal@" + std::to_string(c.q_position0) : " full") +
         (c.heads_major ? " heads-major" : "");
}

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t bytes) { TL_CUDA_CHECK(cudaMalloc(&p, bytes < 16 ? 16 : bytes)); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

void run_case(const Case& c, DType dt, int d, uint64_t seed, cudaStream_t stream) {
  SCOPED_TRACE(describe(c, dt, d));
  const int64_t b = c.batch, sq = c.q_len, skv = c.kv_len, hq = c.q_heads, hkv = c.kv_heads;
  AttentionArgs a;
  a.dtype = dt;
  a.batch = b, a.q_len = sq, a.kv_len = skv, a.q_heads = hq, a.kv_heads = hkv, a.head_dim = d;
  a.causal = c.causal;
  a.q_position0 = c.q_position0;
  a.scale = c.scale;
  if (c.heads_major) {
    a.q_stride = {hq * sq * d, d, sq * d};
    a.k_stride = {hkv * skv * d, d, skv * d};
    a.v_stride = a.k_stride;
    a.out_stride = {sq * hq * (d + 8), hq * (d + 8), d + 8};
  }
  const int64_t out_ld = c.heads_major ? d + 8 : d;
  const int64_t nq = b * sq * hq * d, nkv = b * skv * hkv * d, no = b * sq * hq * out_ld;
  DeviceBuffer q(nq * 2), k(nkv * 2), v(nkv * 2), o(no * 2), lse(b * hq * sq * 4), ref(b * sq * hq * d * 4),
      ref_lse(b * hq * sq * 4);
  // Scores of a few units: the softmax is peaked enough that a wrong row, column or scale shows.
  fill_uniform(dt, q.p, nq, mix_seed(seed, 1), 2.0f, stream);
  fill_uniform(dt, k.p, nkv, mix_seed(seed, 2), 2.0f, stream);
  fill_uniform(dt, v.p, nkv, mix_seed(seed, 3), 1.0f, stream);
  poison_nan(dt, o.p, no, stream);
  poison_device(lse.p, b * hq * sq * 4, 0xff, stream);
  a.q = q.p, a.k = k.p, a.v = v.p, a.out = o.p, a.lse = static_cast<float*>(lse.p);
  attention_forward(a, stream);

  tltest::ReferenceShape s{b, sq, skv, hq, hkv, d, {}, {}, {}, c.causal, c.q_position0,
                           c.scale > 0 ? c.scale : 1.0f / std::sqrt(float(d))};
  const AttentionStrides qs = c.heads_major ? a.q_stride : AttentionStrides{sq * hq * d, hq * d, d};
  const AttentionStrides ks = c.heads_major ? a.k_stride : AttentionStrides{skv * hkv * d, hkv * d, d};
  for (auto [dst, src] : {std::pair{s.q_stride, qs}, std::pair{s.k_stride, ks}, std::pair{s.v_stride, ks}}) {
    dst[0] = src.batch, dst[1] = src.row, dst[2] = src.head;
  }
  const dim3 grid{unsigned(sq), unsigned(hq), unsigned(b)};
  const size_t smem = size_t(skv > 0 ? skv : 1) * 4;
  if (dt == DType::bf16)
    tltest::attention_reference_kernel<<<grid, 128, smem, stream>>>(
        static_cast<const __nv_bfloat16*>(q.p), static_cast<const __nv_bfloat16*>(k.p),
        static_cast<const __nv_bfloat16*>(v.p), static_cast<float*>(ref.p), static_cast<float*>(ref_lse.p), s);
  else
    tltest::attention_reference_kernel<<<grid, 128, smem, stream>>>(
        static_cast<const __half*>(q.p), static_cast<const __half*>(k.p), static_cast<const __half*>(v.p),
        static_cast<float*>(ref.p), static_cast<float*>(ref_lse.p), s);
  check_launch("attention reference");

  // P is rounded to the input type before P · V and the output once more: a few units of the
  // type's last place relative to the largest |v|.
  const double atol = dt == DType::bf16 ? 1.6e-2 : 2.5e-3, rtol = dt == DType::bf16 ? 1.6e-2 : 2.5e-3;
  const Comparison cmp = compare(dt, o.p, out_ld, static_cast<const float*>(ref.p), b * sq * hq, d, atol, rtol, stream);
  EXPECT_EQ(cmp.bad, 0) << tilelink::test::describe(cmp);

  const auto got = download_n(static_cast<const float*>(lse.p), size_t(b * hq * sq), stream);
  const auto want = download_n(static_cast<const float*>(ref_lse.p), size_t(b * hq * sq), stream);
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool ok = std::isinf(want[i]) ? (std::isinf(got[i]) && got[i] < 0)
                                        : std::abs(got[i] - want[i]) <= 1e-3 * std::max(1.0f, std::abs(want[i]));
    if (!ok && bad++ < 5) ADD_FAILURE() << "lse[" << i << "] = " << got[i] << ", reference " << want[i];
  }
  EXPECT_EQ(bad, 0);
}

class Attention : public ::testing::TestWithParam<std::pair<DType, int>> {};

TEST_P(Attention, MatchesAnFp32Reference) {
  const auto [dt, d] = GetParam();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_trace(seed));
  cudaStream_t stream;
  TL_CUDA_CHECK(cudaStreamCreate(&stream));
  const std::vector<Case> cases = {
      {1, 1, 1, 1, 1, false, 0, false, 0},
      {2, 300, 300, 4, 2, false, 0, false, 0},       // grouped-query, lengths mid-tile
      {2, 300, 300, 4, 2, true, 0, false, 0},        // SDPA's causal (top-left)
      {1, 129, 77, 3, 3, false, 0, false, 0},        // one key tile, part-filled
      {1, 77, 513, 8, 1, true, 513 - 77, false, 0},  // FlashAttention's causal (bottom-right)
      {1, 200, 100, 2, 1, true, -50, false, 0},      // the first 50 queries see no key
      {3, 1000, 1000, 6, 2, true, 0, true, 0},       // heads-major inputs, padded output heads
      {1, 640, 1031, 2, 2, false, 0, true, 0.35f},   // explicit scale
      {2, 256, 0, 2, 1, false, 0, false, 0},         // no keys: zeros, lse = -inf
      {1, 2048, 2048, 4, 4, true, 0, false, 0},     // 64 items on the GPU: keys split in 2
      // Few items, long keys: split over the keys and merged (the reference holds <= 12k keys).
      {1, 349, 12000, 2, 2, false, 0, false, 0},
      {2, 100, 9000, 3, 1, true, 9000 - 100, true, 0},  // bottom-right causal, heads-major
      {1, 3000, 3000, 1, 1, true, -50, false, 0},       // 3 splits; early items' splits see no key
  };
  for (size_t i = 0; i < cases.size(); ++i) run_case(cases[i], dt, d, mix_seed(seed, i), stream);
  TL_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_P(Attention, RandomShapes) {
  const auto [dt, d] = GetParam();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(seed_trace(seed));
  cudaStream_t stream;
  TL_CUDA_CHECK(cudaStreamCreate(&stream));
  for (int i = 0; i < 6; ++i) {
    const uint64_t r = mix_seed(seed, 100 + i);
    const int64_t kv_heads = 1 + r % 3, group = 1 + (r >> 8) % 4;
    const int64_t q_len = 1 + (r >> 16) % 1500, kv_len = 1 + (r >> 32) % 1500;
    const bool causal = (r >> 48) % 2 == 1;
    const Case c{1 + int64_t((r >> 50) % 2), q_len, kv_len, kv_heads * group, kv_heads, causal,
                 causal ? int64_t((r >> 52) % 3 == 0 ? kv_len - q_len : 0) : 0, (r >> 56) % 2 == 1, 0};
    run_case(c, dt, d, r, stream);
  }
  TL_CUDA_CHECK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Types, Attention,
                         ::testing::Values(std::pair{DType::bf16, 128}, std::pair{DType::bf16, 64},
                                           std::pair{DType::fp16, 128}, std::pair{DType::fp16, 64}),
                         [](const auto& info) {
                           return std::string(dtype_name(info.param.first)) + "_d" + std::to_string(info.param.second);
                         });

TEST(AttentionArguments, BadArgumentsAreRefusedBeforeLaunch) {
  DeviceBuffer buf(1 << 20);
  AttentionArgs good;
  good.q = good.k = good.v = buf.p;
  good.out = buf.p;
  good.batch = 1, good.q_len = 16, good.kv_len = 16, good.q_heads = 4, good.kv_heads = 2, good.head_dim = 128;
  auto refused = [&](auto change, const char* what) {
    AttentionArgs a = good;
    change(a);
    expect_refused([&] { attention_forward(a, nullptr); }, "attention_forward", what);
  };
  refused([](AttentionArgs& a) { a.head_dim = 96; }, "head_dim 96");
  refused([](AttentionArgs& a) { a.kv_heads = 3; }, "q_heads not a multiple of kv_heads");
  refused([](AttentionArgs& a) { a.k = nullptr; }, "null k");
  refused([](AttentionArgs& a) { a.q_len = -1; }, "negative q_len");
  refused([](AttentionArgs& a) { a.batch = 0; }, "batch 0");
  refused([](AttentionArgs& a) { a.q_stride = {16 * 4 * 128, 4 * 128 + 4, 128}; }, "row stride not a multiple of 8");
  refused([](AttentionArgs& a) { a.v = static_cast<const char*>(a.v) + 2; }, "misaligned v");
  refused([](AttentionArgs& a) { a.scale = NAN; }, "NaN scale");
  refused([](AttentionArgs& a) { a.dtype = DType(7); }, "unknown dtype");
  TL_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace tilelink::test
