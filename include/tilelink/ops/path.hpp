// tilelink/ops/path.hpp — fused or decomposed: the choice every fused op offers its caller.
#pragma once

#include <cstdint>

namespace tilelink {

// Fused: the communication runs beside the GEMM, tile by tile. Decomposed: the GEMM and the
// collective one after the other, as a user writes them without tilelink (cuBLAS + NCCL when
// every rank has its own GPU). Automatic: the op's measured rule (docs/OPS.md).
enum class OpPath : int32_t { automatic = 0, fused = 1, decomposed = 2 };
inline const char* op_path_name(OpPath p) {
  return p == OpPath::fused ? "fused" : p == OpPath::decomposed ? "decomposed" : "auto";
}

}  // namespace tilelink
