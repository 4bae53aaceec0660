// tests/gpu/ops/op_cases.hpp — what the in-process and the multi-process op tests share: the
// modes and variants each op is tested in, how a variant is called, and the tolerance of a
// reduction against its fp32 reference.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "tilelink/ops/ag_gemm/ag_gemm.hpp"
#include "tilelink/ops/allgather_ll/allgather_ll.hpp"
#include "tilelink/ops/flash_decode/flash_decode.hpp"
#include "tilelink/ops/gemm_ar/gemm_ar.hpp"
#include "tilelink/ops/gemm_rs/gemm_rs.hpp"
#include "tilelink/ops/moe/ag_moe.hpp"
#include "tilelink/ops/moe/moe_rs.hpp"
#include "tilelink/testing/check.hpp"

namespace tilelink::test {

// ---- ag_gemm: push/pull x copy engine/SMs, the decomposed path, and the automatic choice ------
struct AgMode {
  CommMode mode;
  CommEngine engine;
  OpPath path = OpPath::fused;
  int chunk_rows = 0;  // 0: the op's default
  RankSplit split = RankSplit::automatic;
};
inline constexpr AgMode kAgModes[] = {{CommMode::push, CommEngine::copy_engine},
                                      {CommMode::pull, CommEngine::copy_engine},
                                      {CommMode::push, CommEngine::sm},
                                      {CommMode::pull, CommEngine::sm},
                                      {CommMode::push, CommEngine::sm, OpPath::decomposed},
                                      {CommMode::pull, CommEngine::sm, OpPath::decomposed},
                                      {CommMode::push, CommEngine::sm, OpPath::decomposed, 0, RankSplit::split},
                                      {CommMode::push, CommEngine::sm, OpPath::automatic}};
inline constexpr int kNumAgModes = int(sizeof(kAgModes) / sizeof(kAgModes[0]));

inline std::string mode_name(const AgMode& m) {
  return std::string(comm_mode_name(m.mode)) + "/" + comm_engine_name(m.engine) + "/" + op_path_name(m.path) +
         (m.chunk_rows ? "/chunk_rows " + std::to_string(m.chunk_rows) : "") +
         (m.split != RankSplit::automatic ? std::string("/split ") + rank_split_name(m.split) : "");
}

inline AgGemmOptions ag_options(const AgMode& m) {
  AgGemmOptions o;
  o.mode = m.mode;
  o.engine = m.engine;
  o.path = m.path;
  o.chunk_rows = m.chunk_rows;
  o.split = m.split;
  return o;
}

// ---- gemm_rs / gemm_ar: RS ring/full-mesh x push/pull, AR one/two-shot; fused or decomposed ---
struct ReduceVariant {
  bool all_reduce;
  RsAlgo rs_algo;
  CommMode mode;
  ArAlgo ar_algo;
  ReducePath path;
  RankSplit split = RankSplit::automatic;  // gemm_rs's decomposed path
  std::string name() const {
    std::string s = all_reduce ? std::string("ar/") + ar_algo_name(ar_algo)
                               : std::string("rs/") + rs_algo_name(rs_algo) + "/" + comm_mode_name(mode);
    return s + (path == ReducePath::decomposed ? "/decomposed" : path == ReducePath::fused ? "/fused" : "/auto") +
           (split != RankSplit::automatic ? std::string("/split ") + rank_split_name(split) : "");
  }
  // The fused ring rounds every running sum to the dtype, and so may NCCL's ring (the decomposed
  // path with one GPU per rank); the fused full-mesh and all-reduce kernels sum in fp32 once.
  // The automatic choice may take either.
  bool rounds_per_hop() const {
    return path != ReducePath::fused || (!all_reduce && rs_algo != RsAlgo::full_mesh);
  }
};

inline std::vector<ReduceVariant> all_reduce_variants() {
  std::vector<ReduceVariant> v;
  for (RsAlgo a : {RsAlgo::ring, RsAlgo::full_mesh})
    for (CommMode m : {CommMode::push, CommMode::pull}) v.push_back({false, a, m, ArAlgo::automatic, ReducePath::fused});
  v.push_back({false, RsAlgo::ring, CommMode::push, ArAlgo::automatic, ReducePath::decomposed});
  // Split by rank on any topology with load/store peers (ranks sharing a GPU too).
  v.push_back({false, RsAlgo::full_mesh, CommMode::push, ArAlgo::automatic, ReducePath::decomposed, RankSplit::split});
  for (ArAlgo a : {ArAlgo::one_shot, ArAlgo::two_shot})
    v.push_back({true, RsAlgo::ring, CommMode::pull, a, ReducePath::fused});
  v.push_back({true, RsAlgo::ring, CommMode::pull, ArAlgo::one_shot, ReducePath::decomposed});
  v.push_back({false, RsAlgo::automatic, CommMode::push, ArAlgo::automatic, ReducePath::automatic});
  v.push_back({true, RsAlgo::ring, CommMode::pull, ArAlgo::automatic, ReducePath::automatic});
  return v;
}

// C[m(/W), n] from this rank's A[m, k], B[n, k] (k per rank).
inline void call_reduce(Context& ctx, const ReduceVariant& v, DType dt, const void* a, const void* b, void* c,
                        int64_t m, int64_t n, int64_t k) {
  if (v.all_reduce) {
    GemmArOptions o;
    o.path = v.path;
    o.algo = v.ar_algo;
    gemm_ar(ctx, {dt, a, b, c, m, n, k}, o);
  } else {
    GemmRsOptions o;
    o.path = v.path;
    o.algo = v.rs_algo;
    o.mode = v.mode;
    o.split = v.split;
    gemm_rs(ctx, {dt, a, b, c, m, n, k}, o);
  }
}

// Tolerance. Every rounding to the dtype errs by at most half an ulp of the value rounded
// (2^-8 relative for bf16, 2^-11 for fp16), and the values rounded are the partials and running
// sums, which can be much larger than the final element: bound them by 4 sigma of a sum of
// world*k products of U(-1,1) pairs (sigma = sqrt(world*k)/3). The ring rounds world+1 times
// (each partial, each running sum), the other algorithms twice (the partial, the result).
inline Tolerance reduce_tolerance(DType dt, int64_t k, int world, bool ring) {
  const double half_ulp = dt == DType::bf16 ? 1.0 / 256 : 1.0 / 2048;
  const double roundings = ring ? world + 1 : 2;
  const double intermediate = 4.0 * std::sqrt(double(k) * world) / 3.0;
  return {roundings * half_ulp * intermediate, 2 * half_ulp * roundings, dt == DType::bf16 ? 1e-2 : 2e-3};
}

}  // namespace tilelink::test
