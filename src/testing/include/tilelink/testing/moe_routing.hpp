// tilelink/testing/moe_routing.hpp — mixture-of-experts routings for tests and benchmarks: top-k
// distinct experts per token, drawn uniformly, Zipf-skewed over the experts, or one-hot (nearly
// every token's first choice is expert 0 and only top-k + 1 experts get any token). Host only;
// a pure function of its arguments.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace tilelink::test {

enum class Routing { uniform, zipf, one_hot };

// ids[t * topk + j], t < tokens: topk distinct experts in [0, experts) per token.
inline std::vector<int32_t> random_routing(Routing routing, int32_t experts, int32_t topk, int64_t tokens,
                                           uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> weight(size_t(experts), 1.0);
  if (routing == Routing::zipf)
    for (int e = 0; e < experts; ++e) weight[size_t(e)] = 1.0 / std::pow(e + 1.0, 1.2);
  if (routing == Routing::one_hot) {
    std::fill(weight.begin(), weight.end(), 0.0);
    weight[0] = 100.0;
    weight[size_t(experts) - 1] = 1.0;
    for (int e = 1; e < topk; ++e) weight[size_t(e)] = 1.0;
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

}  // namespace tilelink::test
