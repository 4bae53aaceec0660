// The GEMM heuristic's score of one config on a shape (private to the engine): the fused ops
// choose by it alone; the plain GEMM takes each config's division from it and then compares
// predicted times where it has them (time_models.hpp).
#pragma once

#include "tilelink/gemm/gemm.hpp"

namespace tilelink::gemm::heuristic {

struct Candidate {
  GemmPlan plan;
  double score;  // higher is better; 0: the config cannot run the shape well at all
};

// The best work division of one config for the shape: `plain` configs may also split K with a
// separate sum, and those on the stream-K scheduler (`sk`) chain split-K or run stream-K.
Candidate best_division(const GemmShape& s, GemmConfig cfg, int sms);

// Whether the score has a measured speed for the config (the others are rated by tile area).
bool has_fitted_prior(GemmConfig cfg);

}  // namespace tilelink::gemm::heuristic
