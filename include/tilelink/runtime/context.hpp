// tilelink/runtime/context.hpp — one rank's handle on a world.
//
// Ops are written once, SPMD, against a Context: they ask it for symmetric memory and signal
// slots (collectively, at equal offsets on every rank), bump the epoch once per call, build the
// device view (ll::Team) for their kernels, and check their inputs are the same on every rank.
// A World (in-process threads, or MPI processes) creates one Context per rank.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "tilelink/ll/team.cuh"
#include "tilelink/core/error.hpp"
#include "tilelink/runtime/heap_layout.hpp"
#include "tilelink/runtime/op_sequence.hpp"

namespace tilelink {

namespace gemm {
class CublasGemm;
}
struct RankProgress;

// How a multi-process world reaches its peers' heaps. Worlds of one process (InProcessWorld)
// address every heap directly and ignore it.
enum class Transport : int32_t {
  automatic = 0,  // $TILELINK_TRANSPORT ("cuda_ipc" or "nvshmem"), else cuda_ipc
  cuda_ipc,       // heaps from cudaMalloc, peers' heaps opened from CUDA IPC handles (one node)
  nvshmem,        // heaps from nvshmem_malloc, peers through nvshmem_ptr (one PE per process)
};
const char* transport_name(Transport t);

struct WorldOptions {
  size_t heap_bytes = 0;           // per rank; 0: $TILELINK_HEAP_MB MiB, else 2048 MiB
  size_t signal_slots = 0;         // per rank; 0: $TILELINK_SIGNAL_SLOTS, else 65536 (512 KiB)
                                   // per 8 ranks of the world
  uint64_t wait_timeout_ms = 0;    // 0: $TILELINK_WAIT_TIMEOUT_MS, else 5000
  uint64_t barrier_timeout_ms = 0; // host barriers and allgathers (in-process and MPI worlds);
                                   // 0: $TILELINK_BARRIER_TIMEOUT_MS, else max(4 x wait timeout, 60 s)
  Transport transport = Transport::automatic;  // multi-process worlds only
  // Multi-process NVSHMEM worlds: treat every process as a node of its own, so every peer is
  // reached through NVSHMEM put-with-signal, never by load/store: the multi-node algorithms,
  // run on one node. false: $TILELINK_ONE_NODE_PER_PROCESS=1 turns it on.
  bool one_node_per_process = false;
};

// Collective plumbing among the ranks of one world: threads of one process, or MPI processes.
class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Gathers `bytes` from every rank into `all` (size() * bytes, in rank order).
  virtual void allgather(const void* mine, void* all, size_t bytes) = 0;
  // Host barrier. Throws tilelink::Error if another rank failed or the barrier timed out.
  virtual void barrier() = 0;
};

namespace detail {
class HeapTransport;  // where a rank's heap comes from, how peers' heaps are mapped (runtime/)
}

class Context {
 public:
  // Built by a World, which chooses the transport. `bootstrap` must outlive the Context.
  Context(Bootstrap& bootstrap, int device, const WorldOptions& options,
          std::unique_ptr<detail::HeapTransport> transport);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Maps every peer's heap into this rank's address space through the transport (collective).
  // Called once by the World.
  void connect();
  // Drops the mappings of the peers' heaps. Multi-process worlds call it on every rank, then
  // barrier, before any rank frees its heap.
  void disconnect();
  // The world's ranks cannot agree on tearing down together any more (a barrier failed): frees
  // only what needs no peer (a transport whose free is collective leaves the heap to the process).
  void abandon_peers() { peers_lost_ = true; }
  // "in-process", "CUDA IPC" or "NVSHMEM".
  const char* transport_name() const;

  int rank() const { return rank_; }
  int num_ranks() const { return num_ranks_; }
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  // The stream fused ops run their communication on, beside the GEMM on stream(); every op of
  // this rank shares it (an op forks it from stream() and joins it back, so calls stay ordered).
  // It has the device's greatest stream priority, so its kernels start ahead of any grid still
  // waiting for SMs (see context.cpp).
  cudaStream_t side_stream() const { return side_stream_; }
  // cuBLAS on stream(), for the decomposed paths (GEMM, then a collective). Made with the context
  // — cuBLAS's setup allocates and may wait for the device, which must not happen inside an op
  // call while other ranks' kernels on this GPU wait for this rank.
  gemm::CublasGemm& cublas() { return *cublas_; }
  const cudaDeviceProp& device_props() const { return props_; }
  // Ranks of this world that run on this rank's GPU (1 when this rank has its GPU to itself).
  int ranks_on_device() const { return ranks_on_device_; }
  // The most ranks that share any one GPU of the world (1: every rank has its own GPU). The same
  // on every rank: choices that must agree across ranks (which path, NCCL or not) use this, never
  // ranks_on_device(), which differs between ranks when the sharing is uneven.
  int max_ranks_per_gpu() const { return max_ranks_per_gpu_; }
  // SMs a rank's kernels may occupy: the smallest share any rank of the world has of its GPU
  // (SMs / ranks on that GPU). Co-resident ranks then always fit at the same time, and since the
  // value is the same on every rank, so are the grids, tile shapes and chunk layouts derived
  // from it (ranks exchange signals by those layouts).
  int sm_count() const { return sm_share_; }
  // Whether every peer's heap is mapped here for load/store (false: some are reached only through
  // NVSHMEM put-with-signal — another node, or WorldOptions::one_node_per_process). The same on
  // every rank.
  bool peers_load_store() const { return peers_load_store_; }

  // ---- symmetric memory: collective, same sizes in the same order on every rank ----------
  void* symmetric_alloc(size_t bytes, const char* what);
  template <class T>
  T* symmetric_alloc_n(size_t n, const char* what) {
    return static_cast<T*>(symmetric_alloc(n * sizeof(T), what));
  }
  // Zero-initialised 64-bit signal slots from the signal pool.
  uint64_t* signal_alloc(size_t count, const char* what);
  // A buffer cached under `key`: allocated on first use, reallocated (collectively) if a later
  // call needs more. Ops use these so repeated calls allocate nothing.
  void* symmetric_workspace(const std::string& key, size_t bytes);
  uint64_t* signal_workspace(const std::string& key, size_t count);
  // Bytes still free in the heap.
  size_t heap_free() const { return layout_.free_bytes(); }
  const HeapLayout& heap_layout() const { return layout_; }

  // Host-side symm_at: address of the symmetric object `local` on rank `peer`, as mapped here.
  // Only for peers reachable by load/store (peers_load_store()).
  template <class T>
  T* peer_ptr(T* local, int peer) const {
    TL_REQUIRE(heap_base_[peer] != nullptr, "tilelink rank ", rank_, ": rank ", peer,
               "'s heap is not mapped here (it is reached through NVSHMEM put-with-signal only)");
    auto offset = reinterpret_cast<const char*>(local) - heap_base_[rank_];
    return reinterpret_cast<T*>(heap_base_[peer] + offset);
  }
  bool is_symmetric(const void* p, size_t bytes = 1) const;

  // ---- per-call state ---------------------------------------------------------------------
  // Starts an op call whose kernels get the epoch from the host (Team::epoch, by value): bumps
  // the epoch every signal of this call is compared against.
  uint64_t begin_op(const char* op);
  // Starts an op call whose work runs in stream order from `stream`: also advances the device
  // epoch word on `stream` (one tiny kernel), which the call's kernels read (ll::call_epoch). Such
  // a call may be captured in a CUDA graph: every replay advances the word again. Returns the
  // host's count of calls (what errors and traces name), which replays do not advance. In a world
  // of one rank, which signals nobody, nothing is launched and kernels read the host's count
  // (a replay, the capture's): counting signals, re-armed every call, still work there; epoch
  // flags raised by one replay would satisfy the next one's waits.
  uint64_t begin_op(const char* op, cudaStream_t stream);
  // Starts an op call that is one kernel which advances the device epoch word itself
  // (ll::kernel_call_team / ll::end_kernel_call_block): like begin_op(op, stream), capturable,
  // without the extra launch.
  uint64_t begin_op_in_kernel(const char* op);
  // This rank cannot make the call `op` it started on `stream` (its input was refused, or its
  // host failed) while its peers may be making it: keeps every rank's epoch in step (begins the
  // call here unless `began`) and raises the call's abort on every rank, marked as refused by this
  // rank, so the peers' waits give up at once and their calls fail naming this rank instead of
  // timing out. Nothing to do for one rank or inside a capture.
  void abandon_call(const char* op, cudaStream_t stream, bool began);
  uint64_t epoch() const { return ops_.epoch(); }
  const char* current_op() const { return ops_.op().c_str(); }
  ll::Team team() const;

  // The op whose call is being captured into a CUDA graph (ops set it around their body;
  // nullptr: none). Nothing of the host may then wait for the device or for the other ranks.
  void set_capturing(const char* op) { capturing_op_ = op; }
  bool capturing() const { return capturing_op_ != nullptr; }
  // Throws, naming `what`, when the call in progress is being captured.
  void refuse_in_capture(const char* what) const;

  // ---- host collectives -------------------------------------------------------------------
  void barrier() {
    refuse_in_capture("wait for the other ranks (a host barrier)");
    bootstrap_.barrier();
  }
  void allgather(const void* mine, void* all, size_t bytes) {
    refuse_in_capture("exchange data with the other ranks (a host collective)");
    bootstrap_.allgather(mine, all, bytes);
  }
  // Throws (on every rank) unless every rank passed the same value.
  template <class T>
  void require_uniform(const T& value, const char* op, const char* what) {
    static_assert(std::is_trivially_copyable_v<T>);
    std::vector<T> all(num_ranks_);
    allgather(&value, all.data(), sizeof(T));
    for (int r = 0; r < num_ranks_; ++r)
      if (std::memcmp(&all[r], &all[0], sizeof(T)) != 0) {
        if constexpr (std::is_arithmetic_v<T>)
          detail::fail(op, ": ", what, " differs across ranks (rank 0 has ", all[0], ", rank ", r,
                       " has ", all[r], ")");
        else
          detail::fail(op, ": ", what, " differs across ranks (rank 0 and rank ", r, ")");
      }
  }

  // Waits until `stream` (this rank's, or one an op forked from it) has done its work, and raises
  // a failed CUDA status as an Error naming `op` (raise). Bounded: tilelink's own kernels bound
  // every wait themselves, and once this context has an NCCL communicator (whose collectives wait
  // for their peers as long as it takes) the host polls for at most host_timeout_ms(), then aborts
  // the communicator — its kernels return — and throws, naming `op`. The next NCCL call makes a
  // new communicator, collectively.
  void wait_stream(cudaStream_t stream, const char* op);
  // The bound on every host wait: barriers, allgathers, and stream waits with NCCL in flight
  // (WorldOptions::barrier_timeout_ms).
  uint64_t host_timeout_ms() const { return host_timeout_ms_; }

  // Waits for this rank's stream (wait_stream), then checks for faults (check_faults). If a kernel failed, or a
  // bounded wait timed out on any rank and aborted a call this rank made, throws an Error naming
  // `op`, this rank, and — for every timed-out wait this process can see — the rank, site, tile,
  // signal slot, expected and observed value.
  void synchronize(const char* op);
  // Throws an Error (as above) if a call of this rank was aborted since the last check: a wait of
  // this rank timed out, or gave up because a wait on another rank timed out in the same call.
  // Reads the world's abort from the device, so call it once this rank's work is done (after a
  // sync of the stream the calls ran on). Each fault is raised once; later calls run normally.
  // (The next op call also raises a fault this rank's own waits saw, without a device read.)
  void check_faults(const char* op);
  // Translates a failed CUDA status from a launch or sync of `op` into an Error (as above).
  [[noreturn]] void raise(const char* op, cudaError_t err);
  // Lets this context's errors show `peer`'s wait report and host progress (in-process worlds:
  // every rank sees every rank; otherwise a rank sees itself).
  void add_visible_peer(const Context& peer) {
    visible_reports_.push_back(peer.report_);
    visible_peers_.push_back(&peer);
  }
  ll::WaitReport* wait_report() const { return report_; }
  // The bound on every device-side wait of this rank's later calls (WorldOptions::wait_timeout_ms).
  void set_wait_timeout_ms(uint64_t ms);
  uint64_t wait_timeout_ms() const { return wait_timeout_ns_ / 1000000ull; }

  Bootstrap& bootstrap() { return bootstrap_; }

  // Records the stage an op call reached on this rank's host (`stage` must outlive the context:
  // a string literal); an error names every visible rank's last stage. With TILELINK_TRACE=1
  // each stage is printed to stderr too, with rank and epoch.
  static bool tracing();
  void trace(const char* stage);

  // Host-side state an op keeps for the life of the context (its streams, events, last epoch,
  // validated shapes), created on first use as T(Context&).
  template <class T>
  T& op_state(const std::string& key) {
    auto& slot = op_states_[key];
    if (!slot) slot = std::make_shared<T>(*this);
    return *static_cast<T*>(slot.get());
  }
  // The state stored under `key`, or nullptr when none was made; nothing is created.
  template <class T>
  T* find_op_state(const std::string& key) {
    const auto it = op_states_.find(key);
    return it == op_states_.end() ? nullptr : static_cast<T*>(it->second.get());
  }
  // Forgets the state stored under `key` (its destructor runs); the next op_state makes it anew.
  void drop_op_state(const std::string& key) { op_states_.erase(key); }

 private:
  Bootstrap& bootstrap_;
  int rank_ = 0, num_ranks_ = 1, device_ = 0, ranks_on_device_ = 1, max_ranks_per_gpu_ = 1, sm_share_ = 1;
  bool peers_load_store_ = true;
  cudaDeviceProp props_{};
  cudaStream_t stream_ = nullptr, side_stream_ = nullptr;
  HeapLayout layout_;                          // offsets of everything carved from the heap
  char* heap_ = nullptr;                       // this rank's heap (from transport_)
  std::vector<char*> heap_base_;               // every rank's heap as mapped here (null: not mapped)
  int local_first_ = 0;                        // the first rank of the Team's load/store table
  uint64_t* signal_pool_ = nullptr;            // first bytes of the heap
  uint64_t wait_timeout_ns_ = 0;
  uint64_t host_timeout_ms_ = 0;
  OpSequence ops_;
  uint64_t* barrier_slots_ = nullptr;          // num_ranks slots reserved in the pool
  uint64_t* epoch_word_ = nullptr;             // the device epoch (one slot of the pool)
  uint64_t* abort_slots_ = nullptr;            // ll::kAbortSlots slots right after it
  uint64_t abort_seen_ = 0;                    // the abort epoch of the last fault raised here
  bool abandoned_since_check_ = false;         // abandon_call ran since the last check_faults
  bool report_raised_ = false;                 // report_ was raised; cleared at the next call
  bool device_epoch_ = false;                  // the current call began on a stream
  const char* capturing_op_ = nullptr;
  ll::WaitReport* report_ = nullptr;           // host-mapped pinned
  ll::WaitReport* report_device_ = nullptr;    // its device address
  std::vector<ll::WaitReport*> visible_reports_;
  std::vector<const Context*> visible_peers_;
  mutable std::mutex progress_mutex_;       // guards the four below (read by peers' errors)
  uint64_t progress_epoch_ = 0;
  std::string progress_op_;
  const char* progress_stage_ = "";
  std::chrono::steady_clock::time_point progress_since_{};  // when progress_stage_ was reached
  std::unique_ptr<detail::HeapTransport> transport_;
  bool peers_lost_ = false;
  std::unique_ptr<gemm::CublasGemm> cublas_;

  // Collective: throws on every rank unless all asked `call` for the same amount.
  void agree_on_request(const char* call, const std::string& what, uint64_t amount,
                        const char* unit);
  [[noreturn]] void rethrow_with_rank(const Error& e) const;
  // Throws the Error for a call aborted by a timed-out wait (on rank `raiser`, -1: unknown).
  [[noreturn]] void raise_aborted(const char* op, int raiser, bool refused);
  std::vector<RankProgress> progress_of_visible_peers() const;
  // Clears this rank's report if it was raised, then raises a fault it holds (host read only).
  void check_own_report();
  void release() noexcept;
  // Runs each kind of stream operation the ops issue once on both streams (see context.cpp).
  void warm_streams();
  // Declared last: destroyed first, while the device, heap and streams are still alive.
  std::map<std::string, std::shared_ptr<void>> op_states_;
};

}  // namespace tilelink
