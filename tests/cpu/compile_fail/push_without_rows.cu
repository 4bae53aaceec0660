// Must NOT compile: tile_push_data needs a mapping whose tiles are row bands (rows(tile)).
#include "tilelink/tile/data.cuh"

__global__ void producer(tilelink::ll::Team team, char* dst, const char* src, uint64_t* signals,
                        tilelink::tile::TileGridMapping grid) {
  tilelink::tile::tile_push_data(tilelink::tile::Block{}, team, grid, 0, dst, src, 0, 128, signals, 1);
}
