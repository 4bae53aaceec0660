// tilelink/core/dtype.hpp — the element types tilelink computes in, shared by every layer (the
// GEMM engines, the runtime's NCCL calls, the ops).
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>

namespace tilelink {

enum class DType : int32_t { bf16 = 0, fp16 = 1 };

inline size_t dtype_size(DType) { return 2; }
inline const char* dtype_name(DType t) { return t == DType::bf16 ? "bf16" : "fp16"; }
inline std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

}  // namespace tilelink
