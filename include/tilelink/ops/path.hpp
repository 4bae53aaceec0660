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

}  // namespace tilelink
