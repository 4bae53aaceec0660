// tilelink-bench primitives — signal round-trip latency and put/get bandwidth between two ranks.
//
//   tilelink-bench primitives [--ranks N] [--mpi] [--iters N] [--warmup N] [--csv FILE]
//                             [--rounds N] [--samples N] [--min-bytes B] [--max-bytes B]
//
// Latency: rank 0 and rank 1 each run a persistent one-block kernel on their own stream; thread 0
// ping-pongs a signal (rank 0 sets rank 1's slot, rank 1 answers by setting rank 0's). Rank 0
// timestamps every `rounds` round trips with globaltimer; the table gives the median (and min)
// over `samples` such batches, per round trip.
// Bandwidth: rank 0 copies `bytes` between its heap and rank 1's: push (rank 0 writes rank 1's
// buffer) and pull (rank 0 reads rank 1's buffer), with SM copies (putmem_block / getmem_block
// over B blocks), TMA (putmem_tma_block / getmem_tma_block over B blocks, 4 x 32 KiB stages each)
// and the copy engine (cudaMemcpyAsync). Each point: `warmup` launches, then `iters` launches
// timed one by one with CUDA events on rank 0's stream; the median is reported as GB/s (bytes
// moved / time; 1 GB = 1e9 B). Sources hold random data; every point is checked against the
// source afterwards.
//
// In-process (default: 2 ranks; all ranks on one GPU when only one is visible — then "peer"
// memory is the same HBM and the bandwidth is a device-local copy) or --mpi (one rank per process
// under mpirun; ranks 0 and 1 are measured, CUDA IPC between them; use MPS when processes share
// a GPU).
// Over the NVSHMEM transport (--mpi, TILELINK_TRANSPORT=nvshmem) also the NVSHMEM backend: signal
// round trips by nvshmemx_signal_op and pushes by put-with-signal over B blocks (checked on rank
// 1 against rank 0's source pattern) — the only rows when the peers are reached through NVSHMEM
// alone (TILELINK_ONE_NODE_PER_PROCESS=1, or several nodes).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/interleaved_timer.hpp"
#include "bench/registry.hpp"
#if defined(TILELINK_BENCH_NVSHMEM)
#include "bench/nvshmem/primitives_nvshmem.hpp"
#endif
#include "tilelink/ll.cuh"
#include "tilelink/runtime/context.hpp"
#include "tilelink/core/error.hpp"
#include "tilelink/runtime/world.hpp"

namespace ll = tilelink::ll;
using tilelink::Context;

namespace {

constexpr uint32_t kTmaStageBytes = 32 * 1024;
constexpr uint32_t kTmaSmem = 4 * kTmaStageBytes + ll::kTmaBarrierBytes;
constexpr int kCopyThreads = 512;

// ---- kernels ----------------------------------------------------------------------------------
template <ll::Scope S, bool kAdd>
__global__ void ping_pong_kernel(ll::Team t, uint64_t* slot, uint64_t base, uint32_t rounds,
                                 uint32_t samples, uint64_t* stamps) {
  if (threadIdx.x != 0 || t.rank > 1) return;
  const int peer = 1 - t.rank;
  for (uint32_t s = 0; s < samples; ++s) {
    if (t.rank == 0) stamps[s] = ll::globaltimer();
    for (uint32_t i = 1; i <= rounds; ++i) {
      const uint64_t k = uint64_t(s) * rounds + i;  // k-th message each way
      const uint64_t v = kAdd ? 1 : base + k;
      if (t.rank == 0) {
        ll::signal_op<S>(t, slot, v, kAdd ? ll::SignalOp::add : ll::SignalOp::set, peer);
        ll::signal_wait_until<S>(t, slot, ll::Cmp::ge, base + k, {int64_t(k), "bench_ping_pong"});
      } else {
        ll::signal_wait_until<S>(t, slot, ll::Cmp::ge, base + k, {int64_t(k), "bench_ping_pong"});
        ll::signal_op<S>(t, slot, v, kAdd ? ll::SignalOp::add : ll::SignalOp::set, peer);
      }
    }
  }
  if (t.rank == 0) stamps[samples] = ll::globaltimer();
}

// Block b moves its 16-byte-aligned slice of [0, bytes).
__device__ inline void block_slice(size_t bytes, size_t& lo, size_t& hi) {
  const size_t per = ((bytes + gridDim.x - 1) / gridDim.x + 15) & ~size_t(15);
  lo = min(bytes, per * blockIdx.x);
  hi = min(bytes, lo + per);
}

__global__ void sm_copy_kernel(ll::Team t, bool push, char* dst, const char* src, size_t bytes, int peer) {
  size_t lo, hi;
  block_slice(bytes, lo, hi);
  if (push) ll::putmem_block(t, dst + lo, src + lo, hi - lo, peer);
  else ll::getmem_block(t, dst + lo, src + lo, hi - lo, peer);
}

__global__ void tma_copy_kernel(ll::Team t, bool push, char* dst, const char* src, size_t bytes, int peer) {
  extern __shared__ __align__(128) char smem[];
  size_t lo, hi;
  block_slice(bytes, lo, hi);
  if (push) ll::putmem_tma_block(t, dst + lo, src + lo, hi - lo, peer, smem, kTmaSmem);
  else ll::getmem_tma_block(t, dst + lo, src + lo, hi - lo, peer, smem, kTmaSmem);
}

__global__ void fill_kernel(uint64_t* p, size_t words, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t x = seed + i * 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    p[i] = x ^ (x >> 31);
  }
}

// Words of `p` that differ from fill_kernel's pattern for `seed`.
__global__ void count_pattern_mismatches_kernel(const uint64_t* p, size_t words, uint64_t seed,
                                                unsigned long long* bad) {
  unsigned long long mine = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t x = seed + i * 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    mine += p[i] != (x ^ (x >> 31));
  }
  if (mine) atomicAdd(bad, mine);
}

__global__ void count_mismatches_kernel(const uint4* a, const uint4* b, size_t n16, unsigned long long* bad) {
  unsigned long long mine = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n16; i += size_t(gridDim.x) * blockDim.x) {
    const uint4 x = a[i], y = b[i];
    mine += (x.x != y.x) | (x.y != y.y) | (x.z != y.z) | (x.w != y.w);
  }
  if (mine) atomicAdd(bad, mine);
}

// ---- host helpers -----------------------------------------------------------------------------
void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    tilelink::detail::fail("tilelink-bench primitives: ", what, ": ", cudaGetErrorName(err), " (",
                           cudaGetErrorString(err), ")");
}

using tilelink::bench::median;

std::string human_bytes(size_t b) {
  char buf[32];
  if (b >= (size_t(1) << 30) && b % (size_t(1) << 30) == 0) std::snprintf(buf, sizeof buf, "%zu GiB", b >> 30);
  else if (b >= (size_t(1) << 20) && b % (size_t(1) << 20) == 0) std::snprintf(buf, sizeof buf, "%zu MiB", b >> 20);
  else if (b >= 1024 && b % 1024 == 0) std::snprintf(buf, sizeof buf, "%zu KiB", b >> 10);
  else std::snprintf(buf, sizeof buf, "%zu B", b);
  return buf;
}

struct Options {
  int iters, warmup;
  uint32_t rounds, samples;
  size_t min_bytes, max_bytes;
  std::string csv;
};

struct LatencyRow {
  std::string variant;
  double median_us, min_us;
  uint32_t rounds, samples;
};
struct BandwidthRow {
  std::string method, direction;
  int blocks;
  size_t bytes;
  double median_us, gbps;
};

// Everything below runs SPMD on every rank (same host collectives in the same order); only
// ranks 0 and 1 launch work, rank 0 measures and prints.
class PrimitivesBench {
 public:
  PrimitivesBench(Context& ctx, const Options& o) : ctx_(ctx), o_(o) {}

  void run() {
    const int me = ctx_.rank();
    std::vector<cudaUUID_t> uuids(ctx_.num_ranks());
    const cudaUUID_t mine = ctx_.device_props().uuid;
    ctx_.allgather(&mine, uuids.data(), sizeof mine);
    same_gpu_ = std::memcmp(&uuids[0], &uuids[1], sizeof(cudaUUID_t)) == 0;
    // Slot 0: the ping-pong; slot 1: the NVSHMEM pushes' signal.
    slot_ = ctx_.signal_alloc(2, "bench primitives: ping-pong and push signals");
    stamps_ = ctx_.symmetric_alloc_n<uint64_t>(o_.samples + 1, "bench primitives: timestamps");
    bad_ = ctx_.symmetric_alloc_n<unsigned long long>(1, "bench primitives: mismatch counter");
    src_ = static_cast<char*>(ctx_.symmetric_alloc(o_.max_bytes, "bench primitives: source"));
    dst_ = static_cast<char*>(ctx_.symmetric_alloc(o_.max_bytes, "bench primitives: destination"));
    fill_kernel<<<1024, 256, 0, ctx_.stream()>>>(reinterpret_cast<uint64_t*>(src_), o_.max_bytes / 8,
                                                 source_seed(me));
    check(cudaGetLastError(), "fill_kernel launch");
    check(cudaStreamSynchronize(ctx_.stream()), "fill");
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&stop_), "cudaEventCreate");
    load_store_ = ctx_.peers_load_store();
#if defined(TILELINK_BENCH_NVSHMEM)
    nvshmem_ = std::string(ctx_.transport_name()) == "NVSHMEM";
    if (nvshmem_)
      TL_REQUIRE(tilelink::bench::nvshmem::attach() == 0,
                 "tilelink-bench primitives: registering the bench's NVSHMEM device state failed");
#endif
    TL_REQUIRE(load_store_ || nvshmem_, "tilelink-bench primitives: the peers are not reachable by load/store");
    ctx_.barrier();

    latency();
    bandwidth();

    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    if (me == 0) print();
  }

 private:
  static uint64_t source_seed(int rank) { return 0xC0FFEEull * (rank + 1); }

  // ---- latency ----------------------------------------------------------------------------
  // Rank 0's globaltimer stamps of the latest ping-pong as microseconds per round trip.
  std::vector<double> round_trip_us(uint32_t rounds, uint32_t samples) {
    std::vector<double> per_rt_us;
    if (ctx_.rank() == 0) {
      std::vector<uint64_t> ts(samples + 1);
      check(cudaMemcpy(ts.data(), stamps_, ts.size() * 8, cudaMemcpyDeviceToHost), "read stamps");
      for (uint32_t s = 0; s < samples; ++s) per_rt_us.push_back((ts[s + 1] - ts[s]) / 1000.0 / rounds);
    }
    return per_rt_us;
  }

  // The same ping-pong with NVSHMEM signals (values carry the epoch: no reset).
  std::vector<double> nvshmem_ping_pong(uint32_t rounds, uint32_t samples) {
#if defined(TILELINK_BENCH_NVSHMEM)
    const uint64_t base = ctx_.begin_op("bench_primitives_nvshmem_ping_pong") << 32;
    ctx_.barrier();
    if (ctx_.rank() <= 1)
      check(tilelink::bench::nvshmem::ping_pong(ctx_.team(), slot_, base, rounds, samples, stamps_, ctx_.stream()),
            "NVSHMEM ping-pong launch");
    ctx_.synchronize("bench_primitives_nvshmem_ping_pong");
    ctx_.barrier();
    return round_trip_us(rounds, samples);
#else
    (void)rounds, (void)samples;
    return {};
#endif
  }

  template <ll::Scope S, bool kAdd>
  std::vector<double> ping_pong(uint32_t rounds, uint32_t samples) {
    const uint64_t epoch = ctx_.begin_op("bench_primitives_ping_pong");
    // set: values carry the epoch, so no reset; add: count from the slot's current value.
    uint64_t base = epoch << 32;
    if (kAdd) check(cudaMemcpy(&base, slot_, 8, cudaMemcpyDeviceToHost), "read slot");
    ctx_.barrier();
    if (ctx_.rank() <= 1) {
      ping_pong_kernel<S, kAdd><<<1, 32, 0, ctx_.stream()>>>(ctx_.team(), slot_, base, rounds, samples, stamps_);
      check(cudaGetLastError(), "ping_pong_kernel launch");
    }
    ctx_.synchronize("bench_primitives_ping_pong");
    ctx_.barrier();
    return round_trip_us(rounds, samples);
  }

  template <class PingPong>
  void latency_variant(const char* name, PingPong ping_pong) {
    ping_pong(o_.rounds, std::min<uint32_t>(2, o_.samples));  // warm-up
    auto us = ping_pong(o_.rounds, o_.samples);
    if (ctx_.rank() == 0)
      latency_.push_back({name, median(us), *std::min_element(us.begin(), us.end()), o_.rounds, o_.samples});
  }
  template <ll::Scope S, bool kAdd>
  void latency_variant(const char* name) {
    latency_variant(name, [&](uint32_t r, uint32_t s) { return ping_pong<S, kAdd>(r, s); });
  }

  void latency() {
    // A short probe: without MPS, processes sharing a GPU time-slice (~4.5 ms per round trip);
    // then shrink the run so it still ends in seconds, and say so.
    auto probe = load_store_ ? ping_pong<ll::Scope::sys, false>(10, 1) : nvshmem_ping_pong(10, 1);
    double probe_us = ctx_.rank() == 0 ? probe.at(0) : 0;
    std::vector<double> all(ctx_.num_ranks());
    ctx_.allgather(&probe_us, all.data(), sizeof probe_us);
    probe_us = all[0];
    if (probe_us > 200) {
      slow_note_ = "round trips take " + std::to_string(int(probe_us)) +
                   " us: the two ranks' kernels are not running concurrently (processes sharing a GPU "
                   "without MPS?); latency run shortened to 5 samples of 10 round trips";
      o_.rounds = 10;
      o_.samples = std::min<uint32_t>(o_.samples, 5);
    }
    if (load_store_) {
      latency_variant<ll::Scope::sys, false>("signal set, sys scope");
      latency_variant<ll::Scope::sys, true>("signal add, sys scope");
      // gpu scope orders only agents of one GPU: measured only when ranks 0 and 1 share it.
      if (same_gpu_) latency_variant<ll::Scope::gpu, false>("signal set, gpu scope");
    }
    if (nvshmem_)
      latency_variant("NVSHMEM signal set", [&](uint32_t r, uint32_t s) { return nvshmem_ping_pong(r, s); });
  }

  // ---- bandwidth --------------------------------------------------------------------------
  // Times `launch` (enqueued on rank 0's stream) and checks the result; collective.
  // `warmup` launches, then `iters` timed one by one on this rank's stream: microseconds each.
  template <class Launch>
  std::vector<double> time_launches(Launch launch) {
    std::vector<double> us;
    for (int i = 0; i < o_.warmup; ++i) launch();
    for (int i = 0; i < o_.iters; ++i) {
      check(cudaEventRecord(start_, ctx_.stream()), "cudaEventRecord");
      launch();
      check(cudaEventRecord(stop_, ctx_.stream()), "cudaEventRecord");
      check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
      float ms = 0;
      check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
      us.push_back(ms * 1000.0);
    }
    return us;
  }

  template <class Launch>
  void point(const std::string& method, bool push, int blocks, size_t bytes, Launch launch) {
    std::vector<double> us;
    char* local = push ? src_ : dst_;
    char* remote = push ? ctx_.peer_ptr(dst_, 1) : ctx_.peer_ptr(src_, 1);
    ctx_.barrier();
    if (ctx_.rank() == 0) {
      check(cudaMemsetAsync(push ? remote : local, 0, bytes, ctx_.stream()), "poison destination");
      us = time_launches(launch);
      check(cudaGetLastError(), (method + " launch").c_str());
      // Check: the destination equals the source (16-byte words; sizes here are multiples of 16).
      check(cudaMemsetAsync(bad_, 0, sizeof *bad_, ctx_.stream()), "reset mismatch counter");
      const char* a = push ? remote : local;
      const char* b = push ? local : remote;
      count_mismatches_kernel<<<264, 256, 0, ctx_.stream()>>>(reinterpret_cast<const uint4*>(a),
                                                             reinterpret_cast<const uint4*>(b), bytes / 16, bad_);
      unsigned long long bad = 0;
      check(cudaMemcpyAsync(&bad, bad_, sizeof bad, cudaMemcpyDeviceToHost, ctx_.stream()), "read mismatches");
      ctx_.synchronize("bench_primitives_bandwidth");
      TL_REQUIRE(bad == 0, "tilelink-bench primitives: ", method, (push ? " push" : " pull"), " of ", bytes,
                 " bytes left ", bad, " of ", bytes / 16, " 16-byte words wrong");
      const double m = median(us);
      bandwidth_.push_back({method, push ? "push" : "pull", blocks, bytes, m, bytes / (m * 1e3)});
    }
    ctx_.barrier();
  }

  // The NVSHMEM push of `bytes` over `blocks` blocks, timed on rank 0, checked on rank 1.
  void nvshmem_point(int blocks, size_t bytes) {
#if defined(TILELINK_BENCH_NVSHMEM)
    std::vector<double> us;
    const uint64_t value = ctx_.begin_op("bench_primitives_nvshmem_put");
    if (ctx_.rank() == 1) check(cudaMemsetAsync(dst_, 0, bytes, ctx_.stream()), "poison destination");
    ctx_.synchronize("bench_primitives_nvshmem_put");
    ctx_.barrier();
    if (ctx_.rank() == 0) {
      us = time_launches([&] {
        check(tilelink::bench::nvshmem::put(ctx_.team(), blocks, dst_, src_, bytes, slot_ + 1, value, 1, ctx_.stream()),
              "NVSHMEM put launch");
      });
      ctx_.synchronize("bench_primitives_nvshmem_put");
    }
    ctx_.barrier();  // every put completed (quiet) before rank 1 looks
    unsigned long long bad = 0;
    if (ctx_.rank() == 1) {
      check(cudaMemsetAsync(bad_, 0, sizeof *bad_, ctx_.stream()), "reset mismatch counter");
      count_pattern_mismatches_kernel<<<264, 256, 0, ctx_.stream()>>>(reinterpret_cast<const uint64_t*>(dst_),
                                                                     bytes / 8, source_seed(0), bad_);
      check(cudaMemcpyAsync(&bad, bad_, sizeof bad, cudaMemcpyDeviceToHost, ctx_.stream()), "read mismatches");
      ctx_.synchronize("bench_primitives_nvshmem_put");
    }
    std::vector<unsigned long long> all(ctx_.num_ranks());
    ctx_.allgather(&bad, all.data(), sizeof bad);
    TL_REQUIRE(all[1] == 0, "tilelink-bench primitives: NVSHMEM push of ", bytes, " bytes over ", blocks,
               " blocks left ", all[1], " of ", bytes / 8, " 8-byte words wrong on rank 1");
    if (ctx_.rank() == 0) {
      const double m = median(us);
      bandwidth_.push_back({"nvshmem", "push", blocks, bytes, m, bytes / (m * 1e3)});
    }
    ctx_.barrier();
#else
    (void)blocks, (void)bytes;
#endif
  }

  void bandwidth() {
    const int max_blocks = ctx_.sm_count();
    std::vector<int> sm_blocks = {8, 32, max_blocks}, tma_blocks = {8, 32, max_blocks};
    for (auto* v : {&sm_blocks, &tma_blocks}) {
      for (int& b : *v) b = std::min(b, max_blocks);
      v->erase(std::unique(v->begin(), v->end()), v->end());
    }
    sm_blocks_ = sm_blocks;
    tma_blocks_ = tma_blocks;
    check(cudaFuncSetAttribute(tma_copy_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kTmaSmem)),
          "cudaFuncSetAttribute(tma_copy_kernel)");
    const ll::Team team = ctx_.team();
    cudaStream_t s = ctx_.stream();
    for (size_t bytes = o_.min_bytes; bytes <= o_.max_bytes; bytes *= 4) {
      if (nvshmem_)
        for (int b : sm_blocks) nvshmem_point(b, bytes);
      if (!load_store_) continue;
      for (bool push : {true, false}) {
        // push: local src -> dst on rank 1; pull: src on rank 1 -> local dst.
        for (int b : sm_blocks)
          point("sm", push, b, bytes, [&] { sm_copy_kernel<<<b, kCopyThreads, 0, s>>>(team, push, dst_, src_, bytes, 1); });
        for (int b : tma_blocks)
          point("tma", push, b, bytes, [&] { tma_copy_kernel<<<b, 128, kTmaSmem, s>>>(team, push, dst_, src_, bytes, 1); });
        char* to = push ? ctx_.peer_ptr(dst_, 1) : dst_;
        const char* from = push ? src_ : ctx_.peer_ptr(src_, 1);
        point("ce", push, 0, bytes, [&] { check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, s), "cudaMemcpyAsync"); });
      }
    }
  }

  // ---- output -----------------------------------------------------------------------------
  void print() {
    const auto& p = ctx_.device_props();
    std::printf("tilelink-bench primitives: %d rank(s), rank 0 <-> rank 1; rank 0 on GPU %d (%s, %d SMs); "
                "%d rank(s) share that GPU, %d SMs per rank\n",
                ctx_.num_ranks(), ctx_.device(), p.name, p.multiProcessorCount, ctx_.ranks_on_device(),
                ctx_.sm_count());
    if (same_gpu_)
      std::printf("note: ranks 0 and 1 share one GPU: \"peer\" memory is the same HBM, so bandwidth is a "
                  "device-local copy, not NVLink\n");
    if (!slow_note_.empty()) std::printf("note: %s\n", slow_note_.c_str());
    std::printf("\nsignal round trip rank 0 -> rank 1 -> rank 0 (persistent 1-block kernels; median of %u "
                "samples of %u round trips)\n",
                o_.samples, o_.rounds);
    std::printf("  %-24s %10s %10s\n", "variant", "median us", "min us");
    for (const auto& r : latency_) std::printf("  %-24s %10.2f %10.2f\n", r.variant.c_str(), r.median_us, r.min_us);

    for (const char* dir : {"push", "pull"}) {
      if (!load_store_ && std::string(dir) == "pull") continue;  // NVSHMEM rows are pushes
      std::printf("\n%s bandwidth, GB/s (%s; median of %d after %d warm-up, CUDA events)\n", dir,
                  std::string(dir) == "push" ? "rank 0 writes rank 1's buffer" : "rank 0 reads rank 1's buffer",
                  o_.iters, o_.warmup);
      std::vector<std::pair<std::string, int>> cols;
      if (load_store_) {
        for (int b : sm_blocks_) cols.push_back({"sm", b});
        for (int b : tma_blocks_) cols.push_back({"tma", b});
        cols.push_back({"ce", 0});
      }
      if (nvshmem_ && std::string(dir) == "push")
        for (int b : sm_blocks_) cols.push_back({"nvshmem", b});
      std::printf("  %-10s", "bytes");
      for (auto& [m, b] : cols) {
        const std::string h = b ? m + "/" + std::to_string(b) + "blk" : std::string("copy-engine");
        std::printf(" %11s", h.c_str());
      }
      std::printf("\n");
      for (size_t bytes = o_.min_bytes; bytes <= o_.max_bytes; bytes *= 4) {
        std::printf("  %-10s", human_bytes(bytes).c_str());
        for (auto& [m, b] : cols) {
          double g = -1;
          for (const auto& r : bandwidth_)
            if (r.direction == dir && r.method == m && r.blocks == b && r.bytes == bytes) g = r.gbps;
          std::printf(" %11.1f", g);
        }
        std::printf("\n");
      }
    }
    std::fflush(stdout);
    if (!o_.csv.empty()) {
      std::FILE* f = std::fopen(o_.csv.c_str(), "w");
      TL_REQUIRE(f != nullptr, "tilelink-bench primitives: cannot write --csv ", o_.csv);
      std::fprintf(f, "kind,method,direction,blocks,bytes,rounds,samples,median_us,min_us,gbps\n");
      for (const auto& r : latency_)
        std::fprintf(f, "latency,\"%s\",roundtrip,1,8,%u,%u,%.4f,%.4f,\n", r.variant.c_str(), r.rounds,
                     r.samples, r.median_us, r.min_us);
      for (const auto& r : bandwidth_)
        std::fprintf(f, "bandwidth,%s,%s,%d,%zu,%d,,%.4f,,%.3f\n", r.method.c_str(), r.direction.c_str(),
                     r.blocks, r.bytes, o_.iters, r.median_us, r.gbps);
      std::fclose(f);
      std::printf("wrote %s\n", o_.csv.c_str());
    }
  }

 private:
  bool same_gpu_ = false;
  bool load_store_ = true;  // the load/store rows (peers mapped here)
  bool nvshmem_ = false;    // the NVSHMEM backend's rows (NVSHMEM transport)
  Context& ctx_;
  Options o_;
  uint64_t* slot_ = nullptr;
  uint64_t* stamps_ = nullptr;
  unsigned long long* bad_ = nullptr;
  char* src_ = nullptr;
  char* dst_ = nullptr;
  cudaEvent_t start_{}, stop_{};
  std::string slow_note_;
  std::vector<int> sm_blocks_, tma_blocks_;
  std::vector<LatencyRow> latency_;
  std::vector<BandwidthRow> bandwidth_;
};

int run_primitives(const tilelink::bench::Args& args) {
  Options o;
  o.iters = int(args.get_int("iters", 20));
  o.warmup = int(args.get_int("warmup", 5));
  o.rounds = uint32_t(args.get_int("rounds", 100));
  o.samples = uint32_t(args.get_int("samples", 50));
  o.min_bytes = size_t(args.get_int("min-bytes", 4096));
  o.max_bytes = size_t(args.get_int("max-bytes", 256l << 20));
  o.csv = args.get("csv", "");
  TL_REQUIRE(o.iters >= 1 && o.warmup >= 0 && o.rounds >= 1 && o.samples >= 1,
             "tilelink-bench primitives: --iters, --rounds and --samples must be >= 1, --warmup >= 0");
  TL_REQUIRE(o.min_bytes >= 16 && o.min_bytes % 16 == 0 && o.max_bytes >= o.min_bytes,
             "tilelink-bench primitives: --min-bytes must be a multiple of 16 and <= --max-bytes");

  tilelink::WorldOptions wo;
  wo.heap_bytes = 2 * o.max_bytes + (size_t(64) << 20);
  auto bench = [&](Context& ctx) {
    TL_REQUIRE(ctx.num_ranks() >= 2, "tilelink-bench primitives: needs at least 2 ranks (got ",
               ctx.num_ranks(), ")");
    PrimitivesBench(ctx, o).run();
  };
  if (args.has("mpi")) {
    int argc = args.argc();
    char** argv = args.argv();
    tilelink::MpiWorld world(&argc, &argv, wo);
    bench(world.context());
  } else {
    const int ranks = int(args.get_int("ranks", 2));
    TL_REQUIRE(ranks >= 2, "tilelink-bench primitives: --ranks must be >= 2 (got ", ranks, ")");
    tilelink::InProcessWorld world(ranks, wo);
    world.run(bench);
  }
  return 0;
}

}  // namespace

TILELINK_BENCH_COMMAND(primitives, "signal round-trip latency and put/get bandwidth (SM, TMA, copy engine)",
                       run_primitives);
