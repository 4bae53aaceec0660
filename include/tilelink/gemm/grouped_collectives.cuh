// tilelink/gemm/grouped_collectives.cuh — the hook points of the grouped (pointer-array) GEMM.
//
// The same contract as the dense engine (hooks.cuh, collectives.cuh), through the same kind of
// CUTLASS extension point: the sm90 pointer-array kernels are used as they are, and reach our
// code through their mainloop and epilogue template parameters.
//
//   HookedArrayMainloop<Base, Hooks>   derives from the builder's pointer-array TMA GMMA mainloop.
//                                      The kernel tells the producer warp's mainloop object which
//                                      group comes next when it rewrites the TMA descriptors
//                                      (tensormaps_perform_update); load() then calls
//                                      hooks.before_load with the tile's group and its rows within
//                                      the group, on every lane, before the base load's TMAs.
//   HookedArrayEpilogue<Base, Hooks>   derives from the pointer-array TMA epilogue; after a tile's
//                                      stores it waits for their completion and calls
//                                      hooks.after_store on one thread (eager publication).
#pragma once

#include <cstdint>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "tilelink/gemm/collectives.cuh"
#include "tilelink/gemm/hooks.cuh"

namespace tilelink::gemm::detail {

template <class Base, class Hooks>
struct HookedArrayMainloop : Base {
  using TileShape = typename Base::TileShape;
  static constexpr int kTileM = cute::size<0>(TileShape{});
  static constexpr int kTileN = cute::size<1>(TileShape{});

  struct Arguments : Base::Arguments {
    Hooks hooks{};
  };
  struct Params : Base::Params {
    Hooks hooks{};
  };

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const& problem_shapes, Arguments const& args,
                                        void* workspace) {
    Params p{Base::to_underlying_arguments(problem_shapes, static_cast<typename Base::Arguments const&>(args),
                                           workspace)};
    p.hooks = args.hooks;
    return p;
  }

  // Called by the whole producer warp before the first tile and whenever the group changes.
  template <class TensorMapStorage, class BaseParams, class TensorMaps, class ProblemShapeMNKL>
  CUTLASS_DEVICE void tensormaps_perform_update(TensorMapStorage& shared_tensormaps, BaseParams const& params,
                                                TensorMaps const& input_tensormaps,
                                                ProblemShapeMNKL problem_shape_mnkl, int32_t next_batch) {
    group_ = next_batch;
    group_m_ = static_cast<int32_t>(cute::get<0>(problem_shape_mnkl));
    group_n_ = static_cast<int32_t>(cute::get<1>(problem_shape_mnkl));
    Base::tensormaps_perform_update(shared_tensormaps, params, input_tensormaps, problem_shape_mnkl, next_batch);
  }

  template <class TensorA, class TensorB, class TensorMapA, class TensorMapB, class KTileIterator,
            class BlockCoord>
  CUTLASS_DEVICE void load(Params const& params, typename Base::MainloopPipeline pipeline,
                           typename Base::PipelineState smem_pipe_write,
                           cute::tuple<TensorA, TensorB> const& load_inputs,
                           cute::tuple<TensorMapA, TensorMapB> const& input_tensormaps,
                           BlockCoord const& blk_coord, KTileIterator k_tile_iter, int k_tile_count,
                           int thread_idx, uint32_t block_rank_in_cluster,
                           typename Base::TensorStorage& shared_tensors) {
    if constexpr (Hooks::kWaitsBeforeLoad) {
      const TileCoord t = make_tile_coord(static_cast<int>(cute::get<0>(blk_coord)),
                                          static_cast<int>(cute::get<1>(blk_coord)), kTileM, kTileN, group_m_,
                                          group_n_, group_);
      // As in the dense engine: a cluster's spare CTA still loads what it multicasts.
      if (t.rows > 0 || t.cols > 0) params.hooks.before_load(t);
    }
    Base::load(params, pipeline, smem_pipe_write, load_inputs, input_tensormaps, blk_coord, k_tile_iter,
               k_tile_count, thread_idx, block_rank_in_cluster, shared_tensors);
  }

 private:
  int32_t group_ = 0, group_m_ = 0, group_n_ = 0;
};

template <class Base, class Hooks>
class HookedArrayEpilogue : public Base {
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
    Params p{Base::to_underlying_arguments(problem_shape, static_cast<typename Base::Arguments const&>(args),
                                           workspace)};
    p.hooks = args.hooks;
    return p;
  }

  CUTLASS_HOST_DEVICE HookedArrayEpilogue(Params const& params, TensorStorage& shared_tensors)
      : Base(params, shared_tensors), hooks_(params.hooks) {}

  template <class ProblemShapeMNKL, class TileShapeMNK, class TileCoordMNKL, class AccEngine,
            class AccLayout, class TiledMma, class TensorMapD>
  CUTLASS_DEVICE auto store(LoadPipeline load_pipeline, LoadPipelineState load_pipe_consumer_state,
                            StorePipeline store_pipeline, StorePipelineState store_pipe_producer_state,
                            ProblemShapeMNKL problem_shape_mnkl, TileShapeMNK tile_shape_MNK,
                            TileCoordMNKL tile_coord_mnkl, cute::Tensor<AccEngine, AccLayout> accumulators,
                            TiledMma tiled_mma, int thread_idx, TensorStorage& shared_tensors,
                            TensorMapD const& store_tensormap, int subtile_idx = -1) {
    auto next = Base::store(load_pipeline, load_pipe_consumer_state, store_pipeline, store_pipe_producer_state,
                            problem_shape_mnkl, tile_shape_MNK, tile_coord_mnkl, accumulators, tiled_mma,
                            thread_idx, shared_tensors, store_tensormap, subtile_idx);
    if constexpr (Hooks::kNotifiesAfterStore) {
      const TileCoord t = make_tile_coord(
          static_cast<int>(cute::get<0>(tile_coord_mnkl)), static_cast<int>(cute::get<1>(tile_coord_mnkl)),
          cute::size<0>(TileShapeMNK{}), cute::size<1>(TileShapeMNK{}),
          static_cast<int>(cute::get<0>(problem_shape_mnkl)), static_cast<int>(cute::get<1>(problem_shape_mnkl)),
          static_cast<int>(cute::get<3>(tile_coord_mnkl)));
      if (t.rows > 0 && t.cols > 0) publish_stored_tile(hooks_, t, thread_idx);
    }
    return next;
  }

 private:
  Hooks const& hooks_;
};

}  // namespace tilelink::gemm::detail
