// Host side of the grouped GEMM engine: names, the config rule, validation, the run-time-dtype
// entry point.
#include "tilelink/gemm/grouped.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "tilelink/gemm/hooks.cuh"
#include "tilelink/core/error.hpp"

namespace tilelink::gemm {

const char* grouped_config_name(GroupedConfig c) {
  return c == GroupedConfig::coop_128x256_c2x1 ? "grouped_coop_128x256_c2x1" : "grouped_pp_64x128_c1x2";
}

GroupedTile grouped_config_tile(GroupedConfig c) {
  return c == GroupedConfig::coop_128x256_c2x1 ? GroupedTile{128, 256} : GroupedTile{64, 128};
}

GroupedConfig choose_grouped_config(int64_t total_rows, int32_t num_groups, int64_t N, int64_t /*K*/) {
  // A group of r rows costs ceil(r / tile_m) tile rows: with 128-row tiles, groups of <= 128
  // rows pay up to twice their work in padding, and a narrow N leaves 256-wide tiles half empty.
  if (num_groups <= 0) return GroupedConfig::pp_64x128_c1x2;
  const int64_t average_rows = total_rows / num_groups;
  if (average_rows <= 128 || N <= 256) return GroupedConfig::pp_64x128_c1x2;
  return GroupedConfig::coop_128x256_c2x1;
}

size_t grouped_gemm_workspace_bytes(GroupedConfig c, int32_t num_groups, int sm_budget) {
  TL_REQUIRE(num_groups >= 0, "grouped_gemm_workspace_bytes: num_groups must be >= 0");
  const int32_t groups = std::max(num_groups, 1);
  if (c == GroupedConfig::coop_128x256_c2x1)
    return std::max(detail::grouped_workspace_bytes_of<__nv_bfloat16, GroupedConfig::coop_128x256_c2x1>(groups, sm_budget),
                    detail::grouped_workspace_bytes_of<__half, GroupedConfig::coop_128x256_c2x1>(groups, sm_budget));
  return std::max(detail::grouped_workspace_bytes_of<__nv_bfloat16, GroupedConfig::pp_64x128_c1x2>(groups, sm_budget),
                  detail::grouped_workspace_bytes_of<__half, GroupedConfig::pp_64x128_c1x2>(groups, sm_budget));
}

void validate_grouped(const GroupedGemmArgs& a, const char* who) {
  auto req = [&](bool ok, auto&&... parts) {
    if (!ok) ::tilelink::detail::fail("grouped_gemm[", who, "] N=", a.N, " K=", a.K, " groups=", a.num_groups, ": ",
                                      parts...);
  };
  req(a.dtype == DType::bf16 || a.dtype == DType::fp16, "unsupported dtype");
  req(a.num_groups >= 0 && a.num_weights >= 0 && a.max_rows >= 0, "negative count");
  if (a.num_groups == 0 || a.max_rows == 0) return;
  req(a.N > 0 && a.K > 0, "N and K must be positive");
  req(a.N < (int64_t(1) << 31) && a.K < (int64_t(1) << 31) && a.max_rows < (int64_t(1) << 31),
      "dimensions must be < 2^31");
  req(a.N % 8 == 0, "N must be a multiple of 8 (16-byte TMA rows of D)");
  req(a.K % 8 == 0, "K must be a multiple of 8 (16-byte TMA rows of A and B)");
  req(a.num_weights > 0, "num_weights must be positive");
  req(a.A && a.B && a.D && a.group_end, "null pointer (A, B, D and group_end are required)");
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; };
  req(aligned(a.A) && aligned(a.B) && aligned(a.D), "A, B and D must be 16-byte aligned");
  req(aligned(a.group_end) || (reinterpret_cast<uintptr_t>(a.group_end) & 3u) == 0, "group_end must be 4-byte aligned");
}

void grouped_gemm(const GroupedGemmArgs& args, GroupedConfig config, int sm_budget, void* workspace,
                  size_t workspace_bytes, cudaStream_t stream) {
  auto run = [&](auto element) {
    using T = decltype(element);
    if (config == GroupedConfig::coop_128x256_c2x1)
      grouped_gemm_launch<T, NoHooks, GroupedConfig::coop_128x256_c2x1>(args, NoHooks{}, sm_budget, workspace,
                                                                         workspace_bytes, stream);
    else
      grouped_gemm_launch<T, NoHooks, GroupedConfig::pp_64x128_c1x2>(args, NoHooks{}, sm_budget, workspace,
                                                                      workspace_bytes, stream);
  };
  if (args.dtype == DType::bf16) run(__nv_bfloat16{});
  else run(__half{});
}

}  // namespace tilelink::gemm
