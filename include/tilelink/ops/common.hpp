// tilelink/ops/common.hpp — vocabulary shared by the fused ops' host APIs.
#pragma once

#include <cstdint>
#include <ostream>

#include "tilelink/core/dtype.hpp"

namespace tilelink {

// Who moves a tile: the rank that has it writes it into the consumer (push), or the consumer
// reads it from the owner (pull).
enum class CommMode : int32_t { push = 0, pull = 1 };
inline const char* comm_mode_name(CommMode m) { return m == CommMode::push ? "push" : "pull"; }
inline std::ostream& operator<<(std::ostream& os, CommMode m) { return os << comm_mode_name(m); }

// What executes the copies: a few SMs running a communication kernel beside the GEMM, or the
// copy engines driven by stream-ordered memcpy + stream write/wait-value signals.
enum class CommEngine : int32_t { sm = 0, copy_engine = 1 };
inline const char* comm_engine_name(CommEngine e) { return e == CommEngine::sm ? "sm" : "ce"; }
inline std::ostream& operator<<(std::ostream& os, CommEngine e) { return os << comm_engine_name(e); }

}  // namespace tilelink
