// src/ops/common/rules.hpp — the measured rules behind the ops' automatic choices (rules.cpp).
// The public ones (gemm_rs_choose_path, …) are declared with their ops; this adds the private one.
#pragma once

#include <cstdint>

#include "tilelink/ops/ag_gemm/ag_gemm.hpp"
#include "tilelink/ops/gemm_ar/gemm_ar.hpp"
#include "tilelink/ops/gemm_rs/gemm_rs.hpp"
#include "tilelink/ops/topology.hpp"

namespace tilelink::ops {

// Reduction blocks of gemm_rs/gemm_ar when the caller passes comm_sms = 0, for K per rank `k`.
int default_reduce_sms(const Topology& topo, int64_t k);

}  // namespace tilelink::ops
