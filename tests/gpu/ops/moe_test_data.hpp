// tests/gpu/ops/moe_test_data.hpp — inputs of the mixture-of-experts tests: 16-bit values and
// routings (uniform, Zipf-skewed, one-hot with experts that get no token).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tilelink/ops/common.hpp"

namespace tilelink::test::moe {

enum class Routing { uniform, zipf, one_hot };

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

// topk distinct experts per token.
inline std::vector<int32_t> route(Routing routing, int32_t experts, int32_t topk, int64_t tokens, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> weight(size_t(experts), 1.0);
  if (routing == Routing::zipf)
    for (int e = 0; e < experts; ++e) weight[size_t(e)] = 1.0 / std::pow(e + 1.0, 1.2);
  if (routing == Routing::one_hot) {
    std::fill(weight.begin(), weight.end(), 0.0);
    weight[0] = 100.0;  // almost every token's first choice
    weight[size_t(experts) - 1] = 1.0;
    for (int e = 1; e < topk; ++e) weight[size_t(e)] = 1.0;  // the other experts get no token
  }
  std::vector<int32_t> ids(size_t(tokens * topk));
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<double> w = weight;
    for (int j = 0; j < topk; ++j) {
      std::discrete_distribution<int> pick(w.begin(), w.end());
      const int e = pick(rng);
      ids[size_t(t * topk + j)] = e;
      w[size_t(e)] = 0.0;
    }
  }
  return ids;
}

}  // namespace tilelink::test::moe
