// The NVSHMEM transport: one PE per process, the heap from nvshmem_malloc. Peers nvshmem_ptr
// reaches are addressed by load/store through ll::Team, exactly as over CUDA IPC; the others
// (another node, or every peer with one node per process) are left unmapped, and the kernels of
// the NVSHMEM device library (libtilelink_nvshmem_device) reach them by put-with-signal.
#include <nvshmem.h>
#include <nvshmemx.h>

#include <mutex>
#include <vector>

#include "check.hpp"
#include "heap_transport.hpp"
#include "nvshmem_device.hpp"

namespace tilelink::detail {

namespace {

// NVSHMEM is initialised once per process; worlds over it take turns. `ours`: tilelink
// initialised it (and finalises it when the last world using it is gone); otherwise the program
// did, and keeps it.
struct NvshmemProcessState {
  std::mutex mutex;
  int worlds = 0;
  bool ours = false;
};
NvshmemProcessState& process_state() {
  static NvshmemProcessState state;
  return state;
}

void check_nvshmem(int status, const char* call) {
  if (status != 0) fail(rank_prefix(), ": ", call, " failed with status ", status);
}

// Every rank passes its own `ok`; throws on every rank unless all are true, naming the first
// rank that was not.
void agree(Bootstrap& bootstrap, bool ok, const std::string& what) {
  std::vector<int32_t> all(bootstrap.size());
  const int32_t mine = ok ? 1 : 0;
  bootstrap.allgather(&mine, all.data(), sizeof mine);
  for (int r = 0; r < bootstrap.size(); ++r)
    if (all[r] == 0) fail(rank_prefix(), ": NVSHMEM transport: ", what, " on rank ", r);
}

class NvshmemTransport final : public HeapTransport {
 public:
  NvshmemTransport(Bootstrap& bootstrap, int device, bool one_node_per_process)
      : bootstrap_(bootstrap), device_(device), one_node_per_process_(one_node_per_process) {}
  ~NvshmemTransport() override { release(/*together=*/false); }

  const char* name() const override { return "NVSHMEM"; }

  char* allocate_heap(size_t bytes) override {
    join_nvshmem();
    void* heap = nvshmem_malloc(bytes);
    agree(bootstrap_, heap != nullptr,
          "nvshmem_malloc(" + format_bytes(bytes) +
              ") of the symmetric heap failed (lower TILELINK_HEAP_MB, or raise NVSHMEM_SYMMETRIC_SIZE /"
              " NVSHMEM_MAX_MEMORY_PER_GPU)");
    return static_cast<char*>(heap);
  }

  // This rank's heap, and every peer's that nvshmem_ptr maps (null for the others).
  std::vector<char*> map_peers(Bootstrap& bootstrap, char* heap, size_t) override {
    std::vector<char*> bases(bootstrap.size());
    for (int r = 0; r < bootstrap.size(); ++r)
      bases[r] = r == bootstrap.rank()    ? heap
                 : one_node_per_process_ ? nullptr
                                         : static_cast<char*>(nvshmem_ptr(heap, r));
    return bases;
  }

  void unmap_peers() noexcept override {}  // NVSHMEM keeps every PE mapped until nvshmem_free

  void free_heap(char* heap, bool together) noexcept override {
    if (heap != nullptr && together) {
      cudaSetDevice(device_);
      nvshmem_free(heap);  // collective: every rank frees now
    }
    release(together);
  }

 private:
  Bootstrap& bootstrap_;
  int device_;
  bool one_node_per_process_;
  bool joined_ = false;

  // Initialises NVSHMEM over the world's bootstrap (rank 0's unique id), or checks that the
  // program's own initialisation has the world's ranks as its PEs.
  void join_nvshmem() {
    auto& state = process_state();
    std::lock_guard<std::mutex> lock(state.mutex);
    TL_REQUIRE(state.worlds == 0, rank_prefix(),
               ": NVSHMEM transport: this process already has a world over NVSHMEM; NVSHMEM has one"
               " set of PEs per process, so a process takes part in one such world at a time");
    const bool initialised = nvshmemx_init_status() >= NVSHMEM_STATUS_IS_INITIALIZED;
    std::vector<int32_t> all(bootstrap_.size());
    const int32_t mine = initialised ? 1 : 0;
    bootstrap_.allgather(&mine, all.data(), sizeof mine);
    for (int r = 1; r < bootstrap_.size(); ++r)
      TL_REQUIRE(all[r] == all[0], rank_prefix(), ": NVSHMEM transport: NVSHMEM is initialised on rank ",
                 all[0] ? 0 : r, " but not on rank ", all[0] ? r : 0,
                 "; either every process initialises it before making the world, or none does");
    if (initialised) {
      TL_REQUIRE(nvshmem_n_pes() == bootstrap_.size() && nvshmem_my_pe() == bootstrap_.rank(), rank_prefix(),
                 ": NVSHMEM transport: the program initialised NVSHMEM with ", nvshmem_n_pes(),
                 " PEs and this process as PE ", nvshmem_my_pe(), "; the world needs its ", bootstrap_.size(),
                 " ranks to be the PEs, rank r = PE r");
    } else {
      nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
      if (bootstrap_.rank() == 0) check_nvshmem(nvshmemx_get_uniqueid(&id), "nvshmemx_get_uniqueid");
      std::vector<nvshmemx_uniqueid_t> ids(bootstrap_.size());
      bootstrap_.allgather(&id, ids.data(), sizeof id);
      nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
      check_nvshmem(nvshmemx_set_attr_uniqueid_args(bootstrap_.rank(), bootstrap_.size(), &ids[0], &attr),
                    "nvshmemx_set_attr_uniqueid_args");
      check_cuda(cudaSetDevice(device_), "cudaSetDevice", device_);
      bootstrap_.barrier();  // every rank arrives: NVSHMEM's own bootstrap waits without a bound
      check_nvshmem(nvshmemx_hostlib_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr),
                    "nvshmemx_hostlib_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID)");
      state.ours = true;
    }
    // The device library's kernels read NVSHMEM's device state from their own module; NVSHMEM
    // fills it in once told where it is (also when the program initialised NVSHMEM itself).
    agree(bootstrap_, nvshmem_device_attach() == 0,
          "registering tilelink's NVSHMEM device library with NVSHMEM (nvshmemi_init_thread) failed");
    ++state.worlds;
    joined_ = true;
  }

  void release(bool together) noexcept {
    if (!joined_) return;
    joined_ = false;
    auto& state = process_state();
    std::lock_guard<std::mutex> lock(state.mutex);
    if (--state.worlds == 0 && state.ours && together) {
      nvshmemx_hostlib_finalize();  // collective too
      state.ours = false;
    }
  }
};

}  // namespace

std::unique_ptr<HeapTransport> make_nvshmem_transport(Bootstrap& bootstrap, int device, bool one_node_per_process) {
  return std::make_unique<NvshmemTransport>(bootstrap, device, one_node_per_process);
}

}  // namespace tilelink::detail
