// Where a rank's symmetric heap comes from and how the peers' heaps become addressable here.
//
// The Context asks its transport for one heap at construction and for every rank's heap, as
// mapped in this process, at connect(). Everything above — signals, tile primitives, ops — only
// sees those addresses (ll::Team::heap_base), so an op runs unchanged on any transport whose
// peers are reachable by load/store.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "tilelink/runtime/context.hpp"

namespace tilelink::detail {

class HeapTransport {
 public:
  virtual ~HeapTransport() = default;
  virtual const char* name() const = 0;
  // Collective: this rank's heap of `bytes` on the current device. Throws with what to change.
  virtual char* allocate_heap(size_t bytes) = 0;
  // Collective: every rank's heap as addressed from this process, in rank order.
  virtual std::vector<char*> map_peers(Bootstrap& bootstrap, char* heap, size_t bytes) = 0;
  // Drops the mappings of the peers' heaps (local; the world barriers around it).
  virtual void unmap_peers() noexcept = 0;
  // Frees this rank's heap. `together`: every rank of the world frees now as well (a transport
  // whose free is collective must not start one when a peer may never join it).
  virtual void free_heap(char* heap, bool together) noexcept = 0;
};

// Ranks of one process (threads): heaps from cudaMalloc, exchanged as plain pointers.
std::unique_ptr<HeapTransport> make_in_process_transport(int device);
// One rank per process on one node: heaps from cudaMalloc, opened from CUDA IPC handles.
std::unique_ptr<HeapTransport> make_cuda_ipc_transport(int device);
// One NVSHMEM PE per process: heaps from nvshmem_malloc. Initialises NVSHMEM over `bootstrap` (a
// unique id from rank 0) unless the program already did. Peers nvshmem_ptr reaches are mapped for
// load/store; the others (another node, or every peer with `one_node_per_process`) are left
// unmapped (null): the ops reach them through NVSHMEM put-with-signal.
std::unique_ptr<HeapTransport> make_nvshmem_transport(Bootstrap& bootstrap, int device, bool one_node_per_process);

// The transport a multi-process world with `options` uses (Transport::automatic resolved).
std::unique_ptr<HeapTransport> make_process_transport(const WorldOptions& options, Bootstrap& bootstrap,
                                                      int device);

}  // namespace tilelink::detail
