// The hook contract, observed through RecordingHooks (test_hooks.cuh):
//   * every non-empty tile gets exactly one before_load and one after_store, the load first;
//   * after_store runs when the tile's output is complete in global memory (the hook reads the
//     tile back and its checksum equals the final D's);
//   * order_m's permutation is applied: with a one-cluster SM budget every CTA walks the whole
//     problem, and its load order is exactly the permuted raster order;
//   * the result is still right (bitwise, exact inputs), for both notify modes.
#include <gtest/gtest.h>

#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "gpu/gemm/reference.cuh"
#include "gpu/gemm/test_hooks.cuh"
#include "tilelink/gemm/gemm.hpp"

using namespace tilelink::gemm;
using namespace tltest;

namespace {

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

template <bool Eager, GemmConfig C>
void hooks_case(int64_t M, int64_t N, int64_t K, Raster raster, int swizzle, bool one_cluster) {
  constexpr GemmConfigInfo ci = config_info(C);
  const GemmShape s = packed(GemmShape{M, N, K});
  const uint64_t seed = fresh_seed();
  char what[256];
  snprintf(what, sizeof what, "%s %s M=%lld N=%lld K=%lld raster=%s swizzle=%d %s seed=%llu", ci.name,
           Eager ? "eager" : "deferred", (long long)M, (long long)N, (long long)K, raster_name(raster), swizzle,
           one_cluster ? "one-cluster" : "full-grid", (unsigned long long)seed);
  SCOPED_TRACE(what);

  DeviceBuffer<__nv_bfloat16> A(size_t(M * K)), B(size_t(N * K)), D(size_t(M * N));
  DeviceBuffer<float> ref(size_t(M * N)), absref(size_t(M * N));
  fill_random<__nv_bfloat16><<<256, 256>>>(A.ptr, M, K, K, seed, 1);
  fill_random<__nv_bfloat16><<<256, 256>>>(B.ptr, N, K, K, seed + 1, 1);
  fill_value<__nv_bfloat16><<<256, 256>>>(D.ptr, M * N, std::nanf(""));
  reference_gemm<__nv_bfloat16><<<dim3(unsigned(cdiv(N, 32)), unsigned(cdiv(M, 32))), 256>>>(
      A.ptr, B.ptr, ref.ptr, absref.ptr, int(M), int(N), int(K), K, K);
  TLT_CUDA(cudaDeviceSynchronize());

  const int64_t tiles_m = cdiv(M, ci.tile_m), tiles_n = cdiv(N, ci.tile_n);
  const int64_t units_m = cdiv(M, int64_t(ci.tile_m) * ci.cluster_m);
  const int64_t units_n = cdiv(N, int64_t(ci.tile_n) * ci.cluster_n);
  const int64_t tiles_alloc = units_m * ci.cluster_m * units_n * ci.cluster_n;
  const int kMaxCtas = 1024, kCap = int(tiles_alloc) + 8;

  DeviceBuffer<int32_t> counters{size_t(5 * tiles_alloc + 1 + kMaxCtas + int64_t(kMaxCtas) * kCap + 3)};
  DeviceBuffer<float> checksum{size_t(tiles_alloc)};
  TLT_CUDA(cudaMemset(counters.ptr, 0, counters.n * sizeof(int32_t)));
  TLT_CUDA(cudaMemset(checksum.ptr, 0, checksum.n * sizeof(float)));
  int32_t* p = counters.ptr;
  HookRecord rec{};
  rec.load_count = p; p += tiles_alloc;
  rec.store_count = p; p += tiles_alloc;
  rec.load_seq = p; p += tiles_alloc;
  rec.store_seq = p; p += tiles_alloc;
  p += tiles_alloc;  // spare
  rec.seq = p; p += 1;
  rec.cta_pos = p; p += kMaxCtas;
  rec.cta_log = p; p += int64_t(kMaxCtas) * kCap;
  rec.cta_log_cap = kCap;
  rec.bad = p;
  rec.checksum = checksum.ptr;

  RecordingHooks<Eager> hooks{};
  hooks.rec = rec;
  hooks.D = D.ptr;
  hooks.ldd = N;
  hooks.M = int32_t(M);
  hooks.N = int32_t(N);
  hooks.tile_m = ci.tile_m;
  hooks.tile_n = ci.tile_n;
  hooks.tiles_n = int32_t(tiles_n);
  hooks.units_m = int32_t(units_m);
  hooks.rows_per_unit = ci.tile_m * ci.cluster_m;
  hooks.perm_a = 1;
  for (int a = 3; a < 1000; a += 2) {
    if (std::gcd<int64_t>(a, units_m) == 1) {
      hooks.perm_a = a;
      break;
    }
  }
  hooks.perm_b = int32_t(units_m / 3);
  auto perm = [&](int64_t u) { return (int64_t(hooks.perm_a) * u + hooks.perm_b) % units_m; };

  GemmLaunchOptions opt;
  opt.sm_budget = one_cluster ? ci.cluster_m * ci.cluster_n : 0;
  opt.raster = raster;
  opt.swizzle = swizzle;
  gemm_launch<__nv_bfloat16, RecordingHooks<Eager>, C>(GemmArgs<__nv_bfloat16>{A.ptr, B.ptr, D.ptr, s}, hooks, opt,
                                                        nullptr);
  TLT_CUDA(cudaDeviceSynchronize());

  const std::vector<int32_t> h = counters.host();
  const std::vector<float> hsum = checksum.host();
  const int32_t* load_count = h.data();
  const int32_t* store_count = load_count + tiles_alloc;
  const int32_t* load_seq = store_count + tiles_alloc;
  const int32_t* store_seq = load_seq + tiles_alloc;
  const int32_t* cta_pos = store_seq + 2 * tiles_alloc + 1;
  const int32_t* cta_log = cta_pos + kMaxCtas;
  const int32_t* bad = cta_log + int64_t(kMaxCtas) * kCap;
  EXPECT_EQ(bad[0], 0) << "order_m called with wrong num_units / rows_per_unit";
  EXPECT_EQ(bad[1], 0) << "before_load called for a tile empty in both dimensions";
  EXPECT_EQ(bad[2], 0) << "after_store got a wrongly clipped TileCoord";

  // D itself (exact inputs: bitwise).
  const std::vector<__nv_bfloat16> hd = D.host();
  const CheckResult r = check_d<__nv_bfloat16>(hd, ref.host(), absref.host(), M, N, N, true, 0.f);
  EXPECT_EQ(r.bad, 0) << r.bad << " wrong elements, first " << r.first;

  int64_t wrong_counts = 0, wrong_sums = 0, wrong_order = 0;
  for (int64_t m = 0; m < tiles_m; ++m) {
    for (int64_t n = 0; n < tiles_n; ++n) {
      const int64_t id = m * tiles_n + n;
      if (load_count[id] != 1 || store_count[id] != 1) {
        if (wrong_counts++ < 5)
          ADD_FAILURE() << "tile (" << m << "," << n << "): " << load_count[id] << " loads, " << store_count[id]
                        << " stores";
        continue;
      }
      if (store_seq[id] <= load_seq[id] && wrong_order++ < 5)
        ADD_FAILURE() << "tile (" << m << "," << n << ") stored before it was loaded";
      float sum = 0.f;
      const int64_t r1 = std::min<int64_t>(M, (m + 1) * ci.tile_m), c1 = std::min<int64_t>(N, (n + 1) * ci.tile_n);
      for (int64_t rr = m * ci.tile_m; rr < r1; ++rr)
        for (int64_t cc = n * ci.tile_n; cc < c1; ++cc) sum += to_f(hd[rr * N + cc]);
      if (!(sum == hsum[id]) && wrong_sums++ < 5)
        ADD_FAILURE() << "tile (" << m << "," << n << "): after_store saw checksum " << hsum[id]
                      << ", final D has " << sum << " (tile not complete when published)";
    }
  }
  EXPECT_EQ(wrong_counts + wrong_sums + wrong_order, 0);
  // Nothing recorded outside the real tiles.
  int64_t total_loads = 0;
  for (int64_t i = 0; i < tiles_alloc; ++i) total_loads += load_count[i];
  EXPECT_EQ(total_loads, tiles_m * tiles_n);

  if (one_cluster) {
    // Grid = one cluster; CTA (bx, by) visits, at step s, M unit P(s / units_n) and N unit
    // s % units_n, at its own position (bx, by) inside the cluster; empty tiles are skipped.
    for (int by = 0; by < ci.cluster_n; ++by) {
      for (int bx = 0; bx < ci.cluster_m; ++bx) {
        const int cta = bx + by * ci.cluster_m;
        std::vector<int32_t> expect;
        for (int64_t st = 0; st < units_m * units_n; ++st) {
          const int64_t m = perm(st / units_n) * ci.cluster_m + bx;
          const int64_t n = (st % units_n) * ci.cluster_n + by;
          if (m < tiles_m && n < tiles_n) expect.push_back(int32_t(m * tiles_n + n));
        }
        std::vector<int32_t> got(cta_log + int64_t(cta) * kCap, cta_log + int64_t(cta) * kCap + std::min(cta_pos[cta], kCap));
        EXPECT_EQ(got, expect) << "CTA (" << bx << "," << by << ") load order differs from the order_m permutation";
      }
    }
  }
}

template <bool Eager, GemmConfig C>
void hooks_suite() {
  // Ragged everywhere; M = 1100 gives an odd number of 128-row tiles (a spare CTA in 2x1
  // clusters), N = 1000 a partial last tile.
  hooks_case<Eager, C>(1000, 1000, 256, Raster::along_n, 1, false);
  hooks_case<Eager, C>(1100, 1000, 136, Raster::along_n, 1, false);
  hooks_case<Eager, C>(1100, 1000, 136, Raster::along_m, 4, false);
  hooks_case<Eager, C>(2200, 760, 64, Raster::along_n, 8, false);
  hooks_case<Eager, C>(1100, 1000, 136, Raster::along_n, 1, true);
  hooks_case<Eager, C>(1000, 520, 72, Raster::along_n, 1, true);
}

}  // namespace

// The instantiated (mode, config) pairs: keep in sync with tests/gpu/gemm/CMakeLists.txt.
TEST(GemmHooks, DeferredCoop128x256Cluster2x1) { hooks_suite<false, GemmConfig::coop_128x256_c2x1>(); }
TEST(GemmHooks, DeferredPingpong128x192Cluster2x1) { hooks_suite<false, GemmConfig::pp_128x192_c2x1>(); }
TEST(GemmHooks, DeferredPingpong64x128Cluster2x1) { hooks_suite<false, GemmConfig::pp_64x128_c2x1>(); }
TEST(GemmHooks, EagerPingpong128x128Cluster2x1) { hooks_suite<true, GemmConfig::pp_128x128_c2x1>(); }
// A 1x2 cluster: the N-spare CTA at the ragged N edge multicasts its share of A to its partner.
TEST(GemmHooks, EagerPingpong128x128Cluster1x2) { hooks_suite<true, GemmConfig::pp_128x128_c1x2>(); }
