// tilelink/tile/coop.cuh — cooperation scopes: who calls a tile primitive together.
//
// Every tile primitive takes a scope as its first argument, and every thread of the scope calls
// it with the same arguments. One thread, the leader, does the signalling; sync() is the barrier
// that orders the members' accesses before it against the leader's release (a notify), or the
// leader's acquire against the members' accesses after it (a wait). Data primitives split their
// bytes over the members (rank() of size()).
//
//   Thread     the calling thread alone: no barrier.
//   Warp       the 32 lanes of the calling warp (__syncwarp).
//   WarpSpan   `lanes` consecutive threads, a multiple of 32 (a warp group is 128), with a named
//              barrier of their own (ids 1..15; 0 is __syncthreads'). Spans of one block that run
//              at the same time need distinct ids, and ids a library the kernel also uses (CUTLASS
//              reserves its own) must not collide.
//   Block      the whole block (__syncthreads). Blocks of the tile layer are one-dimensional.
#pragma once

#include <concepts>
#include <cstdint>

#include "tilelink/ll/team.cuh"

namespace tilelink::tile {

struct Thread {
  static constexpr bool kOneThread = true;
#if defined(__CUDACC__)
  TL_DEVICE bool leader() const { return true; }
  TL_DEVICE uint32_t rank() const { return 0; }
  TL_DEVICE uint32_t size() const { return 1; }
  TL_DEVICE void sync() const {}
#endif
};

struct Warp {
  static constexpr bool kOneThread = false;
#if defined(__CUDACC__)
  TL_DEVICE bool leader() const { return (threadIdx.x & 31) == 0; }
  TL_DEVICE uint32_t rank() const { return threadIdx.x & 31; }
  TL_DEVICE uint32_t size() const { return 32; }
  TL_DEVICE void sync() const { __syncwarp(); }
#endif
};

struct WarpSpan {
  static constexpr bool kOneThread = false;
  int32_t lane;     // this thread's index in the span
  int32_t lanes;    // threads in the span: 32 * warps
  int32_t barrier;  // its named barrier (unused when lanes == 32)

#if defined(__CUDACC__)
  // The span of `warps` warps that holds this thread, when the block is cut into such spans in
  // order; span i of the block uses barrier first_barrier + i.
  static TL_DEVICE WarpSpan of_block(int32_t warps, int32_t first_barrier) {
    const int32_t lanes = 32 * warps;
    return {int32_t(threadIdx.x) % lanes, lanes, first_barrier + int32_t(threadIdx.x) / lanes};
  }
  TL_DEVICE bool leader() const { return lane == 0; }
  TL_DEVICE uint32_t rank() const { return uint32_t(lane); }
  TL_DEVICE uint32_t size() const { return uint32_t(lanes); }
  TL_DEVICE void sync() const {
    if (lanes == 32) __syncwarp();
    else asm volatile("bar.sync %0, %1;" ::"r"(barrier), "r"(lanes) : "memory");
  }
#endif
};

struct Block {
  static constexpr bool kOneThread = false;
#if defined(__CUDACC__)
  TL_DEVICE bool leader() const { return threadIdx.x == 0; }
  TL_DEVICE uint32_t rank() const { return threadIdx.x; }
  TL_DEVICE uint32_t size() const { return blockDim.x; }
  TL_DEVICE void sync() const { __syncthreads(); }
#endif
};

// What a primitive asks of its scope.
template <class C>
concept Coop = std::same_as<C, Thread> || std::same_as<C, Warp> || std::same_as<C, WarpSpan> ||
               std::same_as<C, Block>;

// How a wait's leader spins.
//   full: waits on any slot at system scope and, on a timeout, fills the whole wait report.
//   lean: this rank's own slots only, fewer live registers (a GEMM's producer warp runs on 40).
enum class Spin { full, lean };

}  // namespace tilelink::tile
