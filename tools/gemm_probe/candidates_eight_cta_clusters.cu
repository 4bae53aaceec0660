// 64-row tiles in clusters of eight CTAs, for tens to hundreds of rows and N of 1-4k: cuBLASLt
// runs 40-72-wide tiles in 2x4 and 4x2 clusters there (85 x 3112 x 2616: 48x64 in 2x4), one wave
// of ~100-130 CTAs whose operand tiles each cross L2 once per cluster. Both orientations: A's rows
// on the MMA's M (unswapped) and the weights on it (swapped). The unswapped 2x4 one joined the engine
// (pp_64x64_c2x4); its swapped twin (64x64 in 4x2, same tiles read the same way) is no longer probed.
#include "candidate.cuh"

TILELINK_PROBE_CANDIDATE(pp_64x64_c4x2, 64, 64, 4, 2, pingpong, ab)
TILELINK_PROBE_CANDIDATE(ppba_64x64_c2x4, 64, 64, 2, 4, pingpong, ba)
