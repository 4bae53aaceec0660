// One rank's handle on a world: its heap, signal pool, stream, epoch and wait report.
#include "tilelink/runtime/context.hpp"

#include <cuda.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "check.hpp"
#include "device_epoch.hpp"
#include "failure_message.hpp"
#include "gpu_sharing.hpp"
#include "heap_transport.hpp"
#include "load_store_window.hpp"
#include "nvshmem_device.hpp"
#include "options.hpp"
#include "tilelink/gemm/cublas_gemm.hpp"
#include "tilelink/gemm/gemm.hpp"
#include "tilelink/runtime/nccl.hpp"

namespace tilelink {

using detail::check_cuda;

Context::Context(Bootstrap& bootstrap, int device, const WorldOptions& options,
                 std::unique_ptr<detail::HeapTransport> transport)
    : bootstrap_(bootstrap), rank_(bootstrap.rank()), num_ranks_(bootstrap.size()), device_(device),
      transport_(std::move(transport)) {
  TL_REQUIRE(num_ranks_ >= 1 && num_ranks_ <= ll::kMaxWorldRanks, "tilelink: a world of ", num_ranks_,
             " ranks is not supported (1 to ", ll::kMaxWorldRanks, ")");
  heap_base_.assign(num_ranks_, nullptr);
  const ResolvedOptions opt = resolve_options(options, num_ranks_);
  // symm_at is base + offset: every rank must carve the same layout from the same heap size.
  require_uniform<uint64_t>(opt.heap_bytes, "tilelink world",
                            "the symmetric heap size in bytes (TILELINK_HEAP_MB)");
  require_uniform<uint64_t>(opt.signal_slots, "tilelink world",
                            "the signal slots per rank (TILELINK_SIGNAL_SLOTS)");
  layout_ = HeapLayout(opt.heap_bytes, opt.signal_slots);
  wait_timeout_ns_ = opt.wait_timeout_ms * 1000000ull;
  host_timeout_ms_ = opt.barrier_timeout_ms;
  try {
    check_cuda(cudaSetDevice(device_), "cudaSetDevice", device_);
    check_cuda(cudaGetDeviceProperties(&props_, device_), "cudaGetDeviceProperties", device_);

    // Who shares which GPU, by UUID (device ordinals differ between processes).
    RankGpu mine;
    std::memcpy(mine.uuid.data(), &props_.uuid, mine.uuid.size());
    mine.sms = props_.multiProcessorCount;
    std::vector<RankGpu> gpus(num_ranks_);
    allgather(&mine, gpus.data(), sizeof(RankGpu));
    const GpuSharing sharing = gpu_sharing(gpus, rank_);
    ranks_on_device_ = sharing.ranks_on_my_gpu;
    max_ranks_per_gpu_ = sharing.max_ranks_per_gpu;
    sm_share_ = sharing.sm_share;

    // Both of the rank's streams, made together with the world: every op shares the side stream
    // (it forks from and joins back to the main one), so a rank holds two streams whatever ops
    // it runs, and none is created inside an op call.
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags",
               "cudaStreamNonBlocking, GPU ", device_);
    // The side stream carries the signals and data that GEMM tiles spin on, so it runs at the
    // greatest priority. A GPU starts grids of one priority in launch order, whatever their
    // stream: a grid that waits for free SMs holds back every later grid of its priority. With
    // the side stream at the main stream's priority, a GEMM that cannot fit yet (the SMs held by
    // tiles spinning on this rank's signals, or another rank's on a shared GPU) kept the kernel
    // that would raise those signals from starting, until the waits timed out. Only grids of a
    // higher priority pass a waiting one.
    int lowest = 0, greatest = 0;
    check_cuda(cudaDeviceGetStreamPriorityRange(&lowest, &greatest), "cudaDeviceGetStreamPriorityRange", device_);
    check_cuda(cudaStreamCreateWithPriority(&side_stream_, cudaStreamNonBlocking, greatest),
               "cudaStreamCreateWithPriority", "cudaStreamNonBlocking, priority ", greatest, ", GPU ", device_);
    heap_ = transport_->allocate_heap(layout_.heap_bytes());
    signal_pool_ = reinterpret_cast<uint64_t*>(heap_);
    check_cuda(cudaMemsetAsync(heap_, 0, layout_.pool_bytes(), stream_), "cudaMemsetAsync",
               "signal pool, ", layout_.pool_bytes(), " bytes");
    check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", "after zeroing the signal pool");
    // Same call on every rank, so the barrier slots sit at the same offset everywhere.
    barrier_slots_ = signal_pool_ + layout_.allocate_signals(num_ranks_, "barrier slots (barrier_all)");
    // The device epoch and the world's abort side by side: one read gets both (check_faults).
    epoch_word_ = signal_pool_ + layout_.allocate_signals(1 + ll::kAbortSlots, "device epoch and abort");
    abort_slots_ = epoch_word_ + 1;

    void* report = nullptr;
    check_cuda(cudaHostAlloc(&report, sizeof(ll::WaitReport),
                             cudaHostAllocMapped | cudaHostAllocPortable),
               "cudaHostAlloc", sizeof(ll::WaitReport), " bytes, mapped, for the wait report");
    report_ = static_cast<ll::WaitReport*>(report);
    std::memset(report_, 0, sizeof(ll::WaitReport));
    void* report_device = nullptr;
    check_cuda(cudaHostGetDevicePointer(&report_device, report_, 0), "cudaHostGetDevicePointer",
               "wait report");
    report_device_ = static_cast<ll::WaitReport*>(report_device);
    heap_base_[rank_] = heap_;
    visible_reports_.push_back(report_);
    visible_peers_.push_back(this);

    // One-time driver setup of the GEMM kernels and cuBLAS, now rather than inside a first op
    // call: both may wait for the device, and inside a call other ranks sharing this GPU may
    // already have kernels spinning on this rank's signals.
    gemm::prepare_kernels();
    cublas_ = std::make_unique<gemm::CublasGemm>(stream_);
  } catch (...) {
    peers_lost_ = true;  // the other ranks may not be tearing down with this one
    release();
    throw;
  }
}

Context::~Context() { release(); }

void Context::release() noexcept {
  cudaSetDevice(device_);
  op_states_.clear();  // their streams and events live on this device: before anything else
  cublas_.reset();
  for (cudaStream_t* s : {&stream_, &side_stream_})
    if (*s != nullptr) {
      cudaStreamSynchronize(*s);
      cudaStreamDestroy(*s);
      *s = nullptr;
    }
  if (transport_) {
    transport_->unmap_peers();
    transport_->free_heap(heap_, /*together=*/!peers_lost_);
  }
  if (report_ != nullptr) cudaFreeHost(report_);
  heap_ = nullptr;
  report_ = nullptr;
  cudaGetLastError();  // a failed world leaves sticky errors; teardown has nobody to tell
}

void Context::connect() {
  const std::vector<char*> bases = transport_->map_peers(bootstrap_, heap_, layout_.heap_bytes());
  int mapped = 0;
  for (int r = 0; r < num_ranks_; ++r) {
    heap_base_[r] = bases[r];
    mapped += bases[r] != nullptr;
  }
  local_first_ = load_store_window(heap_base_, rank_, ll::kMaxLocalRanks);
  // Agreed, since every rank's choice of path depends on it. A world larger than the Team's
  // table reaches some peers through NVSHMEM whatever is mapped.
  std::vector<int32_t> all(num_ranks_);
  const int32_t mine = mapped == num_ranks_ && num_ranks_ <= ll::kMaxLocalRanks ? 1 : 0;
  allgather(&mine, all.data(), sizeof mine);
  peers_load_store_ = std::all_of(all.begin(), all.end(), [](int32_t v) { return v == 1; });
  warm_streams();
  barrier();  // nobody signals a peer before that peer is mapped everywhere
}

void Context::warm_streams() {
  // The driver sets up some of a stream's resources on its first use of a kind of operation (a
  // copy, a copy from a peer, a stream memory operation), and that setup may wait for the device.
  // Inside an op call, other ranks sharing this GPU may already have kernels spinning on this
  // rank's signals, so such a first use would stall until their waits time out. Each kind of
  // operation the ops issue runs once on both streams here, while no rank has anything in flight.
  uint64_t* scratch = signal_pool_ + layout_.allocate_signals(2, "stream warm-up");
  using BatchMemOp = CUresult (*)(CUstream, unsigned int, CUstreamBatchMemOpParams*, unsigned int);
  const auto batch_mem_op = detail::driver_entry_point<BatchMemOp>("cuStreamBatchMemOp");
  TL_REQUIRE(batch_mem_op != nullptr, "the CUDA driver has no cuStreamBatchMemOp");
  for (cudaStream_t s : {stream_, side_stream_}) {
    check_cuda(cudaMemcpyAsync(scratch + 1, scratch, sizeof(uint64_t), cudaMemcpyDefault, s),
               "cudaMemcpyAsync", "stream warm-up, local");
    for (int r = 0; r < num_ranks_; ++r)
      if (r != rank_ && heap_base_[r] != nullptr)
        check_cuda(cudaMemcpyAsync(scratch + 1, heap_base_[r], sizeof(uint64_t), cudaMemcpyDefault, s),
                   "cudaMemcpyAsync", "stream warm-up, from rank ", r);
    CUstreamBatchMemOpParams writes[2] = {};
    for (int i = 0; i < 2; ++i) {
      writes[i].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
      writes[i].writeValue.address = reinterpret_cast<CUdeviceptr>(scratch + i);
      writes[i].writeValue.value64 = 0;
    }
    const CUresult written = batch_mem_op(s, 2, writes, 0);
    if (written != CUDA_SUCCESS)
      detail::fail(detail::rank_prefix(), ": cuStreamBatchMemOp (stream warm-up) failed: CUresult ", int(written));
    check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize", "stream warm-up");
  }
}

void Context::disconnect() {
  cudaSetDevice(device_);
  for (cudaStream_t s : {stream_, side_stream_})
    if (s != nullptr) cudaStreamSynchronize(s);
  transport_->unmap_peers();
  for (int r = 0; r < num_ranks_; ++r)
    if (r != rank_) heap_base_[r] = nullptr;
}

const char* Context::transport_name() const { return transport_->name(); }

void Context::rethrow_with_rank(const Error& e) const {
  throw Error("tilelink rank " + std::to_string(rank_) + ": " + e.what());
}

void Context::agree_on_request(const char* call, const std::string& what, uint64_t amount,
                               const char* unit) {
  struct Request {
    uint64_t amount;
    char what[56];
  };
  Request mine{amount, {}};
  std::strncpy(mine.what, what.c_str(), sizeof(mine.what) - 1);
  std::vector<Request> all(num_ranks_);
  allgather(&mine, all.data(), sizeof(Request));
  for (int r = 0; r < num_ranks_; ++r) {
    if (all[r].amount == amount) continue;
    detail::fail("tilelink rank ", rank_, ": ", call, " '", what, "': the ranks asked for ",
                 "different sizes: rank ", rank_, " asked for ", amount, " ", unit, ", rank ", r,
                 " asked for ", all[r].amount, " ", unit, " (for '", all[r].what,
                 "'); every rank must make the same allocations in the same order");
  }
}

void* Context::symmetric_alloc(size_t bytes, const char* what) {
  agree_on_request("symmetric_alloc", what, bytes, "bytes");
  try {
    return heap_ + layout_.allocate(bytes, what);
  } catch (const Error& e) {
    rethrow_with_rank(e);
  }
}

uint64_t* Context::signal_alloc(size_t count, const char* what) {
  agree_on_request("signal_alloc", what, count, "slots");
  try {
    return signal_pool_ + layout_.allocate_signals(count, what);
  } catch (const Error& e) {
    rethrow_with_rank(e);
  }
}

void* Context::symmetric_workspace(const std::string& key, size_t bytes) {
  if (auto offset = layout_.find_workspace(key, bytes)) return heap_ + *offset;
  agree_on_request("symmetric_workspace", key, bytes, "bytes");
  try {
    return heap_ + layout_.grow_workspace(key, bytes);
  } catch (const Error& e) {
    rethrow_with_rank(e);
  }
}

uint64_t* Context::signal_workspace(const std::string& key, size_t count) {
  if (auto index = layout_.find_signal_workspace(key, count)) return signal_pool_ + *index;
  agree_on_request("signal_workspace", key, count, "slots");
  try {
    return signal_pool_ + layout_.grow_signal_workspace(key, count);
  } catch (const Error& e) {
    rethrow_with_rank(e);
  }
}

bool Context::is_symmetric(const void* p, size_t bytes) const {
  const auto addr = reinterpret_cast<uintptr_t>(p), base = reinterpret_cast<uintptr_t>(heap_);
  return heap_ != nullptr && addr >= base && layout_.contains(addr - base, bytes);
}

uint64_t Context::begin_op(const char* op, cudaStream_t stream) {
  const uint64_t epoch = begin_op(op);
  // One rank signals nobody, so its calls pay no extra launch: their kernels take the host's count
  // (Team::epoch). Left to the word, which only this path advances, they would all read the same
  // stale epoch, and a wait would take the abort slot's zero for an abort of its call.
  device_epoch_ = num_ranks_ > 1;
  if (device_epoch_) detail::enqueue_epoch_advance(team(), stream);
  return epoch;
}

uint64_t Context::begin_op_in_kernel(const char* op) {
  const uint64_t epoch = begin_op(op);
  device_epoch_ = num_ranks_ > 1;  // as in begin_op(op, stream)
  return epoch;
}

void Context::refuse_in_capture(const char* what) const {
  if (capturing_op_ == nullptr) return;
  detail::fail("tilelink rank ", rank_, ": ", capturing_op_, " would ", what,
               " while its stream is being captured into a CUDA graph. Make one call with the same "
               "arguments before capturing: the first call of a shape agrees on it across ranks and "
               "sizes its buffers, and later calls are capturable");
}

uint64_t Context::begin_op(const char* op) {
  check_own_report();
  const uint64_t epoch = ops_.begin(op);
  device_epoch_ = false;
  std::lock_guard<std::mutex> lock(progress_mutex_);
  progress_epoch_ = epoch;
  progress_op_ = ops_.op();
  progress_stage_ = "began";
  progress_since_ = std::chrono::steady_clock::now();
  return epoch;
}

bool Context::tracing() {
  static const bool on = [] {
    const char* v = std::getenv("TILELINK_TRACE");
    return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
  }();
  return on;
}

void Context::trace(const char* stage) {
  {
    std::lock_guard<std::mutex> lock(progress_mutex_);
    progress_epoch_ = ops_.epoch();
    progress_stage_ = stage;
    progress_since_ = std::chrono::steady_clock::now();
  }
  if (!tracing()) return;
  std::fprintf(stderr, "[tilelink rank %d epoch %llu] %s: %s\n", rank_, (unsigned long long)ops_.epoch(),
               ops_.op().c_str(), stage);
}

ll::Team Context::team() const {
  ll::Team t{};
  t.rank = rank_;
  t.num_ranks = num_ranks_;
  t.local_first = local_first_;
  for (int i = 0; i < ll::kMaxLocalRanks && local_first_ + i < num_ranks_; ++i)
    t.heap_base[i] = heap_base_[local_first_ + i];
  t.heap_bytes = layout_.heap_bytes();
  t.signal_base = signal_pool_;
  t.signal_slots = layout_.signal_slots();
  t.epoch = ops_.epoch();
  t.wait_timeout_ns = wait_timeout_ns_;
  t.report = report_device_;
  t.barrier_slots = barrier_slots_;
  t.abort_slots = abort_slots_;
  t.epoch_word = device_epoch_ ? epoch_word_ : nullptr;
  return t;
}

void Context::wait_stream(cudaStream_t stream, const char* op) {
  const cudaError_t err = detail::nccl_comm_made(*this) ? detail::wait_stream_beside_nccl(*this, stream, op)
                                                        : cudaStreamSynchronize(stream);
  if (err != cudaSuccess) raise(op, err);
}

void Context::synchronize(const char* op) {
  wait_stream(stream_, op);
  check_faults(op);
}

void Context::set_wait_timeout_ms(uint64_t ms) {
  TL_REQUIRE(ms >= 1 && ms <= UINT64_MAX / 1000000ull, "tilelink rank ", rank_,
             ": the wait timeout must be at least 1 ms, got ", ms);
  wait_timeout_ns_ = ms * 1000000ull;
}

void Context::check_faults(const char* op) {
  const ll::WaitReport mine = snapshot(report_);
  const bool here = !report_raised_ && (mine.failed != 0 || mine.aborted != 0);
  uint64_t slots[1 + ll::kAbortSlots] = {};
  check_cuda(cudaMemcpyAsync(slots, epoch_word_, sizeof(slots), cudaMemcpyDeviceToHost, stream_),
             "cudaMemcpyAsync", "reading the abort slots");
  check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", "after reading the abort slots");
  const uint64_t abort_epoch = slots[1];
  // An abort raised by a rank that is ahead names a call this rank has not made yet: its own
  // waits will give up when it makes it, and a later check raises it then.
  const uint64_t reached = std::max(slots[0], ops_.epoch());
  const bool refused = abort_epoch != 0 && (slots[2] & ll::kAbortRefused) != 0;
  const int raiser = abort_epoch != 0 ? int(slots[2] & (ll::kAbortRefused - 1)) - 1 : -1;
  // A call this rank refused itself (abandon_call) was reported by the refusal's own error — also
  // when other ranks refused it too and the slot names one of them.
  if (refused && (raiser == rank_ || abandoned_since_check_)) abort_seen_ = abort_epoch;
  abandoned_since_check_ = false;
  const bool elsewhere = abort_epoch != 0 && abort_epoch != abort_seen_ && abort_epoch <= reached;
  if (!here && !elsewhere) return;
  abort_seen_ = abort_epoch;
  // This rank's own wait timed out: its abort reached only the peers it can store to.
  if (here && mine.failed != 0 && !peers_load_store_)
    check_cuda(detail::relay_abort_nvshmem(team(), stream_), "relay_abort_nvshmem", "the abort of epoch ", abort_epoch);
  raise_aborted(op, raiser, refused);
}

void Context::abandon_call(const char* op, cudaStream_t stream, bool began) {
  if (num_ranks_ == 1 || capturing()) return;
  // A call begun on the host alone (cuBLAS then NCCL) has no device wait for an abort to end,
  // and its epoch is already counted; its device word is not the call's, so announcing it would
  // name the previous call.
  if (began && !device_epoch_) return;
  if (!began) begin_op_in_kernel(op);  // the kernel below advances the device epoch
  detail::enqueue_refused_call_abort(team(), !began, stream);
  if (!peers_load_store_)
    check_cuda(detail::relay_abort_nvshmem(team(), stream), "relay_abort_nvshmem", "a refused call");
  abandoned_since_check_ = true;
}

void Context::check_own_report() {
  if (capturing()) return;  // no device read or sync inside a capture; the check after it raises
  if (report_raised_) {
    std::memset(static_cast<void*>(report_), 0, sizeof(ll::WaitReport));
    report_raised_ = false;
    return;
  }
  const ll::WaitReport mine = snapshot(report_);
  if (mine.failed != 0 || mine.aborted != 0) check_faults(ops_.op().c_str());
}

void Context::raise_aborted(const char* op, int raiser, bool refused) {
  report_raised_ = true;
  OpFailure f;
  f.op = (op != nullptr && *op != '\0') ? op : ops_.op();
  f.epoch = ops_.epoch();
  f.rank = rank_;
  f.device = device_;
  f.error_name = "call aborted";
  f.error_text = aborted_call_text(raiser, refused);
  std::vector<ll::WaitReport> reports;
  for (const ll::WaitReport* r : visible_reports_) reports.push_back(snapshot(r));
  throw Error(failure_message(f, reports, progress_of_visible_peers()));
}

void Context::raise(const char* op, cudaError_t err) {
  OpFailure f;
  f.op = (op != nullptr && *op != '\0') ? op : ops_.op();
  f.epoch = ops_.epoch();
  f.rank = rank_;
  f.device = device_;
  f.error_name = cudaGetErrorName(err);
  f.error_text = cudaGetErrorString(err);
  std::vector<ll::WaitReport> reports;
  for (const ll::WaitReport* r : visible_reports_) reports.push_back(snapshot(r));
  throw Error(failure_message(f, reports, progress_of_visible_peers()));
}

std::vector<RankProgress> Context::progress_of_visible_peers() const {
  std::vector<RankProgress> progress;
  const auto now = std::chrono::steady_clock::now();
  for (const Context* c : visible_peers_) {
    std::lock_guard<std::mutex> lock(c->progress_mutex_);
    const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(now - c->progress_since_).count();
    progress.push_back({c->rank_, c->progress_epoch_, c->progress_op_, c->progress_stage_, int64_t(age)});
  }
  return progress;
}

}  // namespace tilelink
