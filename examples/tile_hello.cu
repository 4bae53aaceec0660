// The tile layer in one page: rank 0 produces one tile — a band of rows — and pushes it into
// rank 1's copy of a symmetric tensor; rank 1's consumer waits for exactly that tile (bounded),
// then reads it. No host synchronisation between the two: the signal carries the hand-over.
//
//   ./tile_hello            two ranks in this process, on two GPUs or sharing one
//
// The same kernels run unchanged under MpiWorld (one process per GPU) or ProcessWorld.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tilelink/runtime/world.hpp"
#include "tilelink/tile.cuh"

namespace tl = tilelink;
using tl::tile::RowChunkMapping;

constexpr int kRows = 64, kCols = 256;  // the tile: 64 rows of 256 floats

// Producer (rank 0, one block): compute the tile, then push its rows into rank 1's `shared` and
// raise its slot there — data first, then the signal, in one call.
__global__ void produce(tl::ll::Team team, RowChunkMapping map, float* scratch, float* shared, uint64_t* signals) {
  for (int i = threadIdx.x; i < kRows * kCols; i += blockDim.x) scratch[i] = float(i % kCols) + 1000.0f * float(i / kCols);
  __syncthreads();
  const int tile = map.tile(/*rank=*/0, /*chunk=*/0);
  tl::tile::tile_push_data(tl::tile::Block{}, team, map, tile, shared, scratch, /*src_row0=*/0, kCols * sizeof(float),
                           signals, /*to=*/1);
}

// Consumer (rank 1, one block): wait until every tile covering rows [0, kRows) arrived, then sum
// each row.
__global__ void consume(tl::ll::Team team, RowChunkMapping map, const float* shared, const uint64_t* signals,
                        float* row_sums) {
  tl::tile::consumer_tile_wait(tl::tile::Block{}, team, map, signals, tl::tile::RowRange{0, kRows});
  for (int r = threadIdx.x; r < kRows; r += blockDim.x) {
    float s = 0;
    for (int c = 0; c < kCols; ++c) s += shared[r * kCols + c];
    row_sums[r] = s;
  }
}

#define CHECK(call)                                                                                 \
  do {                                                                                              \
    cudaError_t e_ = (call);                                                                        \
    if (e_ != cudaSuccess) throw tl::Error(std::string(#call) + ": " + cudaGetErrorString(e_));     \
  } while (0)

int main() {
  // Two in-process ranks may share one GPU; that needs these before the first CUDA call
  // (InProcessWorld refuses to start without them). Values already set are kept.
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  try {
    tl::InProcessWorld world(2);
    std::vector<float> sums(kRows);
    world.run([&](tl::Context& ctx) {
      // Collective: the same allocations, in the same order, on both ranks.
      auto* shared = ctx.symmetric_alloc_n<float>(kRows * kCols, "hello.rows");
      uint64_t* signals = ctx.signal_alloc(2, "hello.signals");  // one slot per tile
      const RowChunkMapping map = RowChunkMapping::make(kRows, kRows, /*ranks=*/2);  // one tile per rank
      ctx.begin_op("hello");  // a fresh epoch: signals compare against it, nothing is ever reset
      if (ctx.rank() == 0) {
        float* scratch = nullptr;
        CHECK(cudaMalloc(&scratch, kRows * kCols * sizeof(float)));
        produce<<<1, 256, 0, ctx.stream()>>>(ctx.team(), map, scratch, shared, signals);
        CHECK(cudaGetLastError());
        ctx.synchronize("produce");
        CHECK(cudaFree(scratch));
      } else {
        float* row_sums = nullptr;
        CHECK(cudaMalloc(&row_sums, kRows * sizeof(float)));
        consume<<<1, 64, 0, ctx.stream()>>>(ctx.team(), map, shared, signals, row_sums);
        CHECK(cudaGetLastError());
        ctx.synchronize("consume");  // a wait that timed out would be a tilelink::Error here
        CHECK(cudaMemcpy(sums.data(), row_sums, kRows * sizeof(float), cudaMemcpyDeviceToHost));
        CHECK(cudaFree(row_sums));
      }
      ctx.barrier();  // rank 0's push into rank 1 is done and read before the world goes away
    });
    int bad = 0;
    for (int r = 0; r < kRows; ++r) {
      const double want = kCols * (kCols - 1) / 2.0 + 1000.0 * r * kCols;
      if (std::abs(sums[r] - want) > 1e-6 * want) ++bad;
    }
    std::printf("tile_hello: rank 1 received rank 0's tile of %d x %d floats: %s\n", kRows, kCols,
                bad ? "WRONG" : "every row sum correct");
    return bad ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tile_hello: %s\n", e.what());
    return 1;
  }
}
