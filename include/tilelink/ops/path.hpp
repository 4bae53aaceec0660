// tilelink/ops/path.hpp — fused or decomposed: the choice every fused op offers its caller.
#pragma once

#include <cstdint>

namespace tilelink {

// Fused: the communication runs beside the GEMM, tile by tile. Decomposed: cuBLAS and the
// collective in stream order — with one GPU per rank, where it pays, one cuBLAS GEMM per rank's
// rows beside copy-engine transfers (PyTorch async-TP's structure), else the collective and one
// GEMM one after the other, as a user writes them without tilelink (cuBLAS + NCCL). Automatic:
// the op's measured rule (docs/OPS.md).
enum class OpPath : int32_t { automatic = 0, fused = 1, decomposed = 2 };
inline const char* op_path_name(OpPath p) {
  return p == OpPath::fused ? "fused" : p == OpPath::decomposed ? "decomposed" : "auto";
}

// How the decomposed path of ag_gemm and gemm_rs divides its GEMM when the peers are reachable by
// load/store. split: one cuBLAS GEMM per rank's block beside copy-engine transfers (async-TP's
// structure); whole: the collective and one GEMM. automatic: split where the op's rule says it pays
// (one GPU per rank, enough bytes moved and FLOPs per rank: docs/OPS.md). `split` runs it on ranks
// sharing a GPU too, where it only costs: to check or time its synchronisation on any machine. Not
// in a CUDA graph capture (its copies between GPUs stalled first replays) and not over NVSHMEM
// put-with-signal: asked for there, the op refuses before launching.
enum class RankSplit : int32_t { automatic = 0, split = 1, whole = 2 };
inline const char* rank_split_name(RankSplit s) {
  return s == RankSplit::split ? "split" : s == RankSplit::whole ? "whole" : "auto";
}

}  // namespace tilelink
