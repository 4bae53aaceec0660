// tilelink/gemm/collectives.cuh — the three CUTLASS extension points that carry a Hooks object.
//
// Nothing here copies a CUTLASS kernel: the sm90 GemmUniversal kernels (cooperative, ping-pong)
// are used as they are. They reach our code through their template parameters:
//
//   HookedMainloop<Base, Hooks>      derives from the builder's sm90 TMA GMMA warp-specialized
//                                    mainloop; load() calls hooks.before_load(tile) on every lane
//                                    of the producer warp, then the base load issues the TMAs.
//   HookedEpilogue<Base, Hooks, M>   derives from the builder's sm90 TMA warp-specialized epilogue;
//                                    publishes each stored tile through hooks.after_store once
//                                    its TMA stores are complete (see NotifyMode).
//   HookedSchedulerTag<Hooks>        a tile-scheduler tag; TileSchedulerSelector is specialised
//                                    for it and yields HookedPersistentScheduler, which wraps
//                                    PersistentTileSchedulerSm90: the same raster/swizzle walk,
//                                    M units remapped through hooks.order_m (a unit = one
//                                    cluster's CTA tiles along M, so cluster pairs stay together),
//                                    and the scheduler's round-up padding (the swizzle rounds the
//                                    tile grid up to swizzle*cluster) skipped instead of computed.
//
// Params/Arguments of each derive from the base ones (everything else is forwarded), so the
// kernel's own Arguments{mode, problem, mainloop, epilogue, hw_info, scheduler} just carry the
// hooks three times. Hooks must be trivially copyable and default-constructible.
#pragma once

#include <cstdint>

#include "cutlass/cutlass.h"
#include "cutlass/gemm/kernel/sm90_tile_scheduler.hpp"
#include "cutlass/gemm/kernel/sm90_tile_scheduler_stream_k.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "cute/tensor.hpp"
#include "tilelink/gemm/hooks.cuh"

namespace tilelink::gemm {

// When after_store runs (only for Hooks::kNotifiesAfterStore):
//   eager:    at the end of the tile's epilogue, the TMA-issuing warp waits for its bulk stores
//             to complete (cp.async.bulk.wait_group 0, not .read), fences, lane 0 publishes.
//             Lowest latency; the warp group stalls for the store round trip once per tile.
//   deferred: tile i is published when tile i+1's epilogue begins (its stores finished long
//             ago, so the same wait returns at once), the last tile at store_tail. No stall;
//             publication lags by one mainloop (one tile's compute time).
// A Hooks type picks with `static constexpr bool kNotifyEagerly` (default: deferred).
// The ping-pong kernel calls store_tail after every tile, so there both modes are eager.
enum class NotifyMode { eager, deferred };

namespace detail {

template <class Hooks, class = void>
struct notify_mode_of {
  static constexpr NotifyMode value = NotifyMode::deferred;
};
template <class Hooks>
struct notify_mode_of<Hooks, std::void_t<decltype(Hooks::kNotifyEagerly)>> {
  static constexpr NotifyMode value = Hooks::kNotifyEagerly ? NotifyMode::eager : NotifyMode::deferred;
};

CUTLASS_HOST_DEVICE TileCoord make_tile_coord(int m_blk, int n_blk, int tile_m, int tile_n, int M, int N,
                                              int group = 0) {
  TileCoord t;
  t.group = group;
  t.m_blk = m_blk;
  t.n_blk = n_blk;
  t.row0 = m_blk * tile_m;
  t.col0 = n_blk * tile_n;
  int r = M - t.row0, c = N - t.col0;
  t.rows = r < 0 ? 0 : (r < tile_m ? r : tile_m);
  t.cols = c < 0 ? 0 : (c < tile_n ? c : tile_n);
  return t;
}

// ---- mainloop ------------------------------------------------------------------------------
template <class Base, class Hooks>
struct HookedMainloop : Base {
  using TileShape = typename Base::TileShape;
  static constexpr int kTileM = cute::size<0>(TileShape{});
  static constexpr int kTileN = cute::size<1>(TileShape{});

  struct Arguments : Base::Arguments {
    Hooks hooks{};
  };
  struct Params : Base::Params {
    Hooks hooks{};
    int32_t M = 0, N = 0;
  };

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const& problem_shape, Arguments const& args,
                                        void* workspace) {
    Params p{Base::to_underlying_arguments(
        problem_shape, static_cast<typename Base::Arguments const&>(args), workspace)};
    auto mnkl = cute::append<4>(problem_shape, 1);
    p.hooks = args.hooks;
    p.M = static_cast<int32_t>(cute::get<0>(mnkl));
    p.N = static_cast<int32_t>(cute::get<1>(mnkl));
    return p;
  }

  template <class ProblemShape>
  static bool can_implement(ProblemShape const& problem_shape, Arguments const& args) {
    return Base::can_implement(problem_shape, static_cast<typename Base::Arguments const&>(args));
  }

  // Producer warp, all 32 lanes (the kernel calls load() with the whole warp).
  template <class TensorA, class TensorB, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load(Params const& params, typename Base::MainloopPipeline pipeline,
                           typename Base::PipelineState smem_pipe_write,
                           cute::tuple<TensorA, TensorB> const& load_inputs,
                           BlockCoord const& blk_coord, KTileIterator k_tile_iter, int k_tile_count,
                           int thread_idx, uint32_t block_rank_in_cluster,
                           typename Base::TensorStorage& shared_tensors) {
    if constexpr (Hooks::kWaitsBeforeLoad) {
      const TileCoord t = make_tile_coord(static_cast<int>(cute::get<0>(blk_coord)),
                                          static_cast<int>(cute::get<1>(blk_coord)), kTileM, kTileN,
                                          params.M, params.N);
      // A spare CTA of a cluster at the ragged edge has an empty tile but still loads its share
      // of the operand it multicasts to its partner: with cluster_n > 1 that is the partner's A
      // rows (seen on the H200: an N-spare CTA of pp_64x128_c1x2 fed its partner unarrived rows
      // of an all-gathered A). So only a tile empty in both M and N is not announced; hooks get
      // rows == 0 or cols == 0 for the empty dimension.
      if (t.rows > 0 || t.cols > 0) params.hooks.before_load(t);
    }
    Base::load(params, pipeline, smem_pipe_write, load_inputs, blk_coord, k_tile_iter, k_tile_count,
               thread_idx, block_rank_in_cluster, shared_tensors);
  }
};

// ---- epilogue ------------------------------------------------------------------------------
// After a tile's epilogue: the TMA stores were issued by warp 0 of the storing threads
// (CUTLASS's issue_tma_store), each lane committing its own bulk async-groups, so every lane of
// that warp waits for its own, the writes are made visible to the generic proxy, and one thread
// publishes the tile. Shared by the dense and the grouped epilogues.
template <class Hooks>
CUTLASS_DEVICE void publish_stored_tile(Hooks const& hooks, TileCoord const& t, int thread_idx) {
  if (thread_idx / 32 == 0) {
#if defined(__CUDA_ARCH__)
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");  // writes done, not just smem read
    asm volatile("fence.proxy.async.global;" ::: "memory");    // async-proxy writes -> generic
    __syncwarp();
    if (thread_idx % 32 == 0) hooks.after_store(t);
#endif
  }
}

template <class Base, class Hooks, NotifyMode Mode>
class HookedEpilogue : public Base {
 public:
  using TensorStorage = typename Base::TensorStorage;
  using LoadPipeline = typename Base::LoadPipeline;
  using LoadPipelineState = typename Base::LoadPipelineState;
  using StorePipeline = typename Base::StorePipeline;
  using StorePipelineState = typename Base::StorePipelineState;

  struct Arguments : Base::Arguments {
    Hooks hooks{};
  };
  struct Params : Base::Params {
    Hooks hooks{};
  };

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const& problem_shape, Arguments const& args,
                                        void* workspace) {
    Params p{Base::to_underlying_arguments(
        problem_shape, static_cast<typename Base::Arguments const&>(args), workspace)};
    p.hooks = args.hooks;
    return p;
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const& problem_shape, Arguments const& args) {
    return Base::get_workspace_size(problem_shape, static_cast<typename Base::Arguments const&>(args));
  }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const& problem_shape, Arguments const& args,
                                              void* workspace, cudaStream_t stream,
                                              cutlass::CudaHostAdapter* adapter = nullptr) {
    return Base::initialize_workspace(problem_shape, static_cast<typename Base::Arguments const&>(args),
                                      workspace, stream, adapter);
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const& problem_shape, Arguments const& args) {
    return Base::can_implement(problem_shape, static_cast<typename Base::Arguments const&>(args));
  }

  CUTLASS_HOST_DEVICE HookedEpilogue(Params const& params, TensorStorage& shared_tensors)
      : Base(params, shared_tensors), hooks_(params.hooks) {}

  template <class ProblemShapeMNKL, class TileShapeMNK, class TileCoordMNKL, class AccEngine,
            class AccLayout, class TiledMma>
  CUTLASS_DEVICE auto store(LoadPipeline load_pipeline, LoadPipelineState load_pipe_consumer_state,
                            StorePipeline store_pipeline, StorePipelineState store_pipe_producer_state,
                            ProblemShapeMNKL problem_shape_mnkl, TileShapeMNK tile_shape_MNK,
                            TileCoordMNKL tile_coord_mnkl, cute::Tensor<AccEngine, AccLayout> accumulators,
                            TiledMma tiled_mma, int thread_idx, TensorStorage& shared_tensors,
                            int subtile_idx = -1) {
    if constexpr (Hooks::kNotifiesAfterStore && Mode == NotifyMode::deferred) {
      publish_pending(thread_idx);
    }
    auto next = Base::store(load_pipeline, load_pipe_consumer_state, store_pipeline,
                            store_pipe_producer_state, problem_shape_mnkl, tile_shape_MNK,
                            tile_coord_mnkl, accumulators, tiled_mma, thread_idx, shared_tensors,
                            subtile_idx);
    if constexpr (Hooks::kNotifiesAfterStore) {
      const TileCoord t = make_tile_coord(
          static_cast<int>(cute::get<0>(tile_coord_mnkl)), static_cast<int>(cute::get<1>(tile_coord_mnkl)),
          cute::size<0>(TileShapeMNK{}), cute::size<1>(TileShapeMNK{}),
          static_cast<int>(cute::get<0>(problem_shape_mnkl)),
          static_cast<int>(cute::get<1>(problem_shape_mnkl)));
      if (t.rows > 0 && t.cols > 0) {
        if constexpr (Mode == NotifyMode::eager) {
          publish(t, thread_idx);
        } else {
          pending_ = t;
          has_pending_ = true;
          thread_idx_ = thread_idx;
        }
      }
    }
    return next;
  }

  CUTLASS_DEVICE auto store_tail(LoadPipeline load_pipeline, LoadPipelineState load_pipe_consumer_state,
                                 StorePipeline store_pipeline,
                                 StorePipelineState store_pipe_producer_state) {
    auto next = Base::store_tail(load_pipeline, load_pipe_consumer_state, store_pipeline,
                                 store_pipe_producer_state);
    if constexpr (Hooks::kNotifiesAfterStore && Mode == NotifyMode::deferred) {
      publish_pending(thread_idx_);
    }
    return next;
  }

 private:
  // The epilogue's TMA stores are issued (and committed into bulk async-groups) by warp 0 of
  // the threads that run store() (thread_idx / 32 == 0): CUTLASS's `issue_tma_store`. Bulk
  // groups are per thread, so every lane of that warp waits for its own groups.
  CUTLASS_DEVICE void publish(TileCoord const& t, int thread_idx) { publish_stored_tile(hooks_, t, thread_idx); }
  CUTLASS_DEVICE void publish_pending(int thread_idx) {
    if (has_pending_) {
      publish(pending_, thread_idx);
      has_pending_ = false;
    }
  }

  Hooks const& hooks_;
  TileCoord pending_{};
  bool has_pending_ = false;
  int thread_idx_ = 0;
};

// ---- tile scheduler ------------------------------------------------------------------------
template <class Hooks>
struct HookedSchedulerTag {};

template <class Hooks, class TileShape, class ClusterShape>
class HookedPersistentScheduler : public cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90 {
  using Base = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90;
  static constexpr int kTileM = cute::size<0>(TileShape{});
  static constexpr int kTileN = cute::size<1>(TileShape{});
  static constexpr int kClusterM = cute::size<0>(ClusterShape{});
  static constexpr int kClusterN = cute::size<1>(ClusterShape{});

 public:
  using WorkTileInfo = typename Base::WorkTileInfo;
  using BaseParams = typename Base::Params;
  using RasterOrder = typename Base::RasterOrder;
  using RasterOrderOptions = typename Base::RasterOrderOptions;

  struct Arguments : Base::Arguments {
    Hooks hooks{};
  };
  struct Params : BaseParams {
    Hooks hooks{};
    int32_t units_m = 0;  // cluster units along M / N that hold at least one row / column
    int32_t units_n = 0;
  };

  template <class ProblemShapeMNKL, class TileShapeT, class ClusterShapeT>
  static Params to_underlying_arguments(ProblemShapeMNKL problem_shape_mnkl, TileShapeT tile_shape,
                                        ClusterShapeT cluster_shape,
                                        cutlass::KernelHardwareInfo const& hw_info,
                                        Arguments const& arguments, void* workspace = nullptr,
                                        const uint32_t epilogue_subtile = 1,
                                        uint32_t ktile_start_alignment_count = 1u) {
    Params p{Base::to_underlying_arguments(problem_shape_mnkl, tile_shape, cluster_shape, hw_info,
                                           static_cast<typename Base::Arguments const&>(arguments),
                                           workspace, epilogue_subtile, ktile_start_alignment_count)};
    p.hooks = arguments.hooks;
    const int64_t M = cute::get<0>(problem_shape_mnkl), N = cute::get<1>(problem_shape_mnkl);
    p.units_m = static_cast<int32_t>((M + kTileM * kClusterM - 1) / (kTileM * kClusterM));
    p.units_n = static_cast<int32_t>((N + kTileN * kClusterN - 1) / (kTileN * kClusterN));
    return p;
  }

  static bool can_implement(Arguments const& args) {
    return Base::can_implement(static_cast<typename Base::Arguments const&>(args));
  }

  CUTLASS_HOST_DEVICE HookedPersistentScheduler() {}

  CUTLASS_DEVICE explicit HookedPersistentScheduler(Params const& params) : Base(params), params_(&params) {
#if defined(__CUDA_ARCH__)
    // The same linearisation as StaticPersistentTileScheduler's constructor.
    if (params.raster_order_ == RasterOrder::AlongN) {
      idx_ = uint64_t(blockIdx.x) + uint64_t(blockIdx.y) * uint64_t(gridDim.x);
    } else {
      idx_ = uint64_t(blockIdx.x) * uint64_t(gridDim.y) + uint64_t(blockIdx.y);
    }
    grid_ = uint64_t(gridDim.x) * uint64_t(gridDim.y) * uint64_t(gridDim.z);
#endif
    settle();
  }

  template <class ClusterShapeT>
  CUTLASS_DEVICE WorkTileInfo initial_work_tile_info(ClusterShapeT) {
    return get_current_work();
  }

  CUTLASS_DEVICE WorkTileInfo get_current_work() const {
    WorkTileInfo w = cur_;
    if constexpr (Hooks::kReordersM) {
      if (w.is_valid()) {
        const int unit = w.M_idx / kClusterM;
        const int u = params_->hooks.order_m(unit, params_->units_m, kTileM * kClusterM);
        w.M_idx = u * kClusterM + (w.M_idx - unit * kClusterM);
      }
    }
    return w;
  }

  CUTLASS_DEVICE void advance_to_next_work(uint32_t advance_count = 1) {
    for (uint32_t i = 0; i < advance_count; ++i) {
      idx_ += grid_;
      settle();
    }
  }

  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo) {
    advance_to_next_work();
    return cute::make_tuple(get_current_work(), true);
  }

  template <class TileSchedulerPipeline, class TileSchedulerPipelineState>
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo w, TileSchedulerPipeline&, TileSchedulerPipelineState) {
    return fetch_next_work(w);
  }

  CUTLASS_DEVICE bool is_last_tile(WorkTileInfo&, uint32_t advance_count = 1) const {
    HookedPersistentScheduler next = *this;
    next.advance_to_next_work(advance_count);
    return !next.cur_.is_valid();
  }

 private:
  // The base walk at idx_, skipping work units that lie wholly in the round-up padding.
  // Padding is decided per cluster unit, so all CTAs of a cluster skip the same units.
  CUTLASS_DEVICE void settle() {
    while (true) {
      cur_ = Base::get_current_work_for_linear_idx(idx_);
      if (!cur_.is_valid()) return;
      if (cur_.M_idx / kClusterM < params_->units_m && cur_.N_idx / kClusterN < params_->units_n) return;
      idx_ += grid_;
    }
  }

  Params const* params_ = nullptr;
  uint64_t idx_ = 0;
  uint64_t grid_ = 1;
  WorkTileInfo cur_{};
};

// ---- stream-K scheduler ------------------------------------------------------------------
// CUTLASS's sm90 stream-K scheduler, with an is_last_tile that compiles: the kernel asks it (to
// let the next grid launch early) when CUTLASS_ENABLE_GDC_FOR_SM90 is set, and CUTLASS 4.2's own
// passes a member to a non-const reference from a const method. Same walk: a copy advances.
struct StreamKSchedulerTag {};

template <class TileShape, class ClusterShape>
class StreamKScheduler : public cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90StreamK<TileShape, ClusterShape> {
  using Base = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90StreamK<TileShape, ClusterShape>;

 public:
  using Base::Base;
  using WorkTileInfo = typename Base::WorkTileInfo;

  CUTLASS_DEVICE bool is_last_tile(WorkTileInfo work_tile_info, uint32_t advance_count = 1) const {
    if (Base::continue_current_work(work_tile_info)) return false;
    Base next = *this;
    next.advance_to_next_work(advance_count);
    return !next.get_current_work().is_valid();
  }
};

}  // namespace detail
}  // namespace tilelink::gemm

namespace cutlass::gemm::kernel::detail {
template <class ArchTag, class TileShape, class ClusterShape, uint32_t SchedulerPipelineStageCount>
struct TileSchedulerSelector<::tilelink::gemm::detail::StreamKSchedulerTag, ArchTag, TileShape, ClusterShape,
                             SchedulerPipelineStageCount> {
  using Scheduler = ::tilelink::gemm::detail::StreamKScheduler<TileShape, ClusterShape>;
};

template <class Hooks, class ArchTag, class TileShape, class ClusterShape, uint32_t SchedulerPipelineStageCount>
struct TileSchedulerSelector<::tilelink::gemm::detail::HookedSchedulerTag<Hooks>, ArchTag, TileShape,
                             ClusterShape, SchedulerPipelineStageCount> {
  using Scheduler = ::tilelink::gemm::detail::HookedPersistentScheduler<Hooks, TileShape, ClusterShape>;
};
}  // namespace cutlass::gemm::kernel::detail
