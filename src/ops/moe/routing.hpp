// src/ops/moe/routing.hpp — mixture-of-experts routing tables, built on the device.
//
// From topk_ids[M, topk] (the experts of every token; token t belongs to rank t / tokens_per_rank):
//   group g = chunk * experts + expert, where chunk c holds the tokens of rank
//   (first_rank + c) % world (ag_moe: first_rank = me, its own tokens' tiles come first;
//   moe_rs: me + 1, its own rows' tiles come last);
//   group_end[g]     end row of group g in the sorted order (inclusive prefix sum of the sizes)
//   group_weight[g]  the expert of group g (g % experts)
//   sorted_entry[p]  the entry t*topk + j at sorted row p (stable: ascending entry within a group)
//   entry_row[i]     the sorted row of entry i, -1 if its expert id is out of range
// Invalid ids sort after every group (they belong to none) and are counted into *bad_ids.
// All of it is stream-ordered device work (a key kernel, CUB's scan and radix sort, an inverse
// kernel): no host synchronisation, capturable in a CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "tilelink/ll/team.cuh"  // TL_HOST_DEVICE

namespace tilelink::ops {

struct MoeRoutingShape {
  int64_t tokens = 0;  // M, over all ranks
  int64_t tokens_per_rank = 0;
  int32_t topk = 0, experts = 0, world = 1, first_rank = 0;
  TL_HOST_DEVICE int64_t entries() const { return tokens * topk; }
  TL_HOST_DEVICE int32_t groups() const { return world * experts; }
};

struct MoeRoutingTables {
  int32_t* group_end = nullptr;
  int32_t* group_weight = nullptr;
  int32_t* sorted_entry = nullptr;
  int32_t* entry_row = nullptr;
};

// Device bytes of the tables and their scratch for `shape`.
size_t moe_routing_workspace_bytes(const MoeRoutingShape& shape);

// Enqueues the table build on `stream`; `workspace` holds moe_routing_workspace_bytes (256-byte
// aligned). bad_ids: device-visible counter (host-mapped), incremented per invalid id.
// entry_row: where the inverse goes (a caller's output; nullptr: the workspace).
MoeRoutingTables enqueue_moe_routing(const MoeRoutingShape& shape, const int32_t* topk_ids, void* workspace,
                                     size_t workspace_bytes, int32_t* bad_ids, cudaStream_t stream,
                                     int32_t* entry_row = nullptr);

// The count of invalid expert ids the routing kernels saw, in host-mapped memory: the device adds,
// the host reads without synchronising (a later call, or after a synchronisation) and raises once
// per new count. One per op of a context.
class MoeRoutingErrors {
 public:
  MoeRoutingErrors();
  ~MoeRoutingErrors();
  MoeRoutingErrors(const MoeRoutingErrors&) = delete;
  MoeRoutingErrors& operator=(const MoeRoutingErrors&) = delete;
  int32_t* device_counter() const { return device_; }
  // Throws tilelink::Error naming `op` if the count grew since the last raise.
  void raise_new(const char* op, const char* effect);

 private:
  volatile int32_t* host_ = nullptr;
  int32_t* device_ = nullptr;
  int32_t reported_ = 0;
};

// Bits of the sort key: groups plus the "invalid" key.
int moe_routing_key_bits(int32_t groups);

}  // namespace tilelink::ops
