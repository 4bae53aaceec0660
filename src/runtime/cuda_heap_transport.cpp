// The transports over cudaMalloc'd heaps: plain pointers within a process, CUDA IPC across.
#include <string>
#include <vector>

#include "check.hpp"
#include "heap_transport.hpp"
#include "options.hpp"

namespace tilelink::detail {

namespace {

char* cuda_malloc_heap(size_t bytes, int device) {
  void* heap = nullptr;
  const cudaError_t err = cudaMalloc(&heap, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    fail(rank_prefix(), ": cudaMalloc(", format_bytes(bytes), ") for the symmetric heap on GPU ", device,
         " failed: ", cudaGetErrorName(err), " (", cudaGetErrorString(err),
         "); lower TILELINK_HEAP_MB (MiB per rank), especially where ranks share a GPU");
  }
  return static_cast<char*>(heap);
}

class CudaMallocTransport : public HeapTransport {
 public:
  explicit CudaMallocTransport(int device) : device_(device) {}
  char* allocate_heap(size_t bytes) override { return cuda_malloc_heap(bytes, device_); }
  void free_heap(char* heap, bool) noexcept override {
    if (heap != nullptr) cudaFree(heap);
  }

 protected:
  int device_;
};

class InProcessTransport final : public CudaMallocTransport {
 public:
  using CudaMallocTransport::CudaMallocTransport;
  const char* name() const override { return "in-process"; }
  std::vector<char*> map_peers(Bootstrap& bootstrap, char* heap, size_t) override {
    std::vector<char*> bases(bootstrap.size());
    bootstrap.allgather(&heap, bases.data(), sizeof heap);
    return bases;
  }
  void unmap_peers() noexcept override {}
};

class CudaIpcTransport final : public CudaMallocTransport {
 public:
  using CudaMallocTransport::CudaMallocTransport;
  ~CudaIpcTransport() override { unmap_peers(); }
  const char* name() const override { return "CUDA IPC"; }
  std::vector<char*> map_peers(Bootstrap& bootstrap, char* heap, size_t bytes) override {
    cudaIpcMemHandle_t handle{};
    check_cuda(cudaIpcGetMemHandle(&handle, heap), "cudaIpcGetMemHandle", "symmetric heap of ",
               format_bytes(bytes), " on GPU ", device_);
    std::vector<cudaIpcMemHandle_t> handles(bootstrap.size());
    bootstrap.allgather(&handle, handles.data(), sizeof handle);
    std::vector<char*> bases(bootstrap.size());
    for (int r = 0; r < bootstrap.size(); ++r) {
      if (r == bootstrap.rank()) {
        bases[r] = heap;
        continue;
      }
      void* p = nullptr;
      check_cuda(cudaIpcOpenMemHandle(&p, handles[r], cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle",
                 "heap of rank ", r, ", cudaIpcMemLazyEnablePeerAccess, on GPU ", device_);
      opened_.push_back(p);
      bases[r] = static_cast<char*>(p);
    }
    return bases;
  }
  void unmap_peers() noexcept override {
    if (opened_.empty()) return;
    cudaSetDevice(device_);
    for (void* p : opened_) cudaIpcCloseMemHandle(p);  // best effort: nothing to report to
    opened_.clear();
    cudaGetLastError();
  }

 private:
  std::vector<void*> opened_;
};

}  // namespace

std::unique_ptr<HeapTransport> make_in_process_transport(int device) {
  return std::make_unique<InProcessTransport>(device);
}

std::unique_ptr<HeapTransport> make_cuda_ipc_transport(int device) {
  return std::make_unique<CudaIpcTransport>(device);
}

std::unique_ptr<HeapTransport> make_process_transport(const WorldOptions& options, Bootstrap& bootstrap,
                                                      int device) {
  const Transport transport = resolve_transport(options.transport);
  const bool one_node_per_process = resolve_one_node_per_process(options.one_node_per_process);
  TL_REQUIRE(!one_node_per_process || transport == Transport::nvshmem,
             "tilelink: one node per process (TILELINK_ONE_NODE_PER_PROCESS=1) reaches peers through NVSHMEM"
             " put-with-signal: it needs the NVSHMEM transport (TILELINK_TRANSPORT=nvshmem), not ",
             transport_name(transport));
  TL_REQUIRE(transport == Transport::nvshmem || bootstrap.size() <= ll::kMaxLocalRanks, "tilelink: a world of ",
             bootstrap.size(), " ranks over CUDA IPC; CUDA IPC maps every peer's heap for load/store, which"
             " reaches 1 to ", ll::kMaxLocalRanks, " ranks: use the NVSHMEM transport (TILELINK_TRANSPORT=nvshmem)"
             " for larger worlds");
  switch (transport) {
    case Transport::nvshmem: return make_nvshmem_transport(bootstrap, device, one_node_per_process);
    default: return make_cuda_ipc_transport(device);
  }
}

}  // namespace tilelink::detail
