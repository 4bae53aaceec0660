// tilelink/runtime/op_sequence.hpp — the epoch of the current op call, and its name.
//
// Signals are compared against the epoch of the call that waits on them (see ll/signal.cuh). The
// pool starts zeroed and epochs start at 1, so a fresh slot never satisfies a wait, and because
// epochs only grow, a value left by call k can never satisfy a wait of call k+1: no op ever has to
// reset a signal. Every rank makes the same op calls in the same order, so epochs agree across
// ranks without communication.
#pragma once

#include <cstdint>
#include <string>

#include "tilelink/core/error.hpp"

namespace tilelink {

class OpSequence {
 public:
  // Starts a call of `op`; returns its epoch (1 for the first call).
  uint64_t begin(const char* op) {
    TL_REQUIRE(epoch_ != UINT64_MAX, "op sequence: epoch counter exhausted at ", op_);
    ++epoch_;
    op_ = (op != nullptr && *op != '\0') ? op : "(unnamed op)";
    return epoch_;
  }
  uint64_t epoch() const { return epoch_; }  // 0 before the first call
  const std::string& op() const { return op_; }

 private:
  uint64_t epoch_ = 0;
  std::string op_ = "(none)";
};

}  // namespace tilelink
