// tests/gpu/ops/moe_test_data.hpp — inputs of the mixture-of-experts tests: 16-bit values on the
// host and routings (tilelink/testing/moe_routing.hpp).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tilelink/ops/common.hpp"
#include "tilelink/testing/moe_routing.hpp"

namespace tilelink::test::moe {

inline uint16_t to_bits(DType dt, float f) {
  if (dt == DType::bf16) {
    const __nv_bfloat16 h = __float2bfloat16(f);
    return *reinterpret_cast<const uint16_t*>(&h);
  }
  const __half h = __float2half(f);
  return *reinterpret_cast<const uint16_t*>(&h);
}
inline double from_bits(DType dt, uint16_t b) {
  if (dt == DType::bf16) return __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(&b));
  return __half2float(*reinterpret_cast<const __half*>(&b));
}
inline std::vector<uint16_t> random_values(DType dt, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<uint16_t> out(n);
  for (auto& x : out) x = to_bits(dt, u(rng));
  return out;
}

using test::Routing;

inline std::vector<int32_t> route(Routing routing, int32_t experts, int32_t topk, int64_t tokens, uint64_t seed) {
  return test::random_routing(routing, experts, topk, tokens, seed);
}

}  // namespace tilelink::test::moe
