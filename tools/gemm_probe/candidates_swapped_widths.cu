// Swapped candidates whose width (A's rows per tile) fits tens to hundreds of rows with little
// padding, as the vendor's tiles come in widths of every multiple of 8: M = 137 pads to 192 on
// the engine's 96-wide swapped tile, to 144 here; M = 415 to 576 on its 192-wide one, to 416 on
// two columns of 208. Ping-pong up to 176 columns (one warp group holds the tile's accumulators),
// cooperative beyond.
#include "candidate.cuh"

TILELINK_PROBE_CANDIDATE(ppba_128x144_c2x1, 128, 144, 2, 1, pingpong, ba)
TILELINK_PROBE_CANDIDATE(ppba_128x176_c2x1, 128, 176, 2, 1, pingpong, ba)
