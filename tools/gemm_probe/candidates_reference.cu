// Two of the engine's own configs built the probe's way: compared with `tilelink-bench gemm
// --alone --configs pp_64x128_c2x1,coop_128x256_c2x1`, they show what the probe's launch path
// (CUTLASS's adapter and scheduler instead of the engine's) costs.
#include "candidate.cuh"

TILELINK_PROBE_CANDIDATE(ref_pp_64x128_c2x1, 64, 128, 2, 1, pingpong, ab)
TILELINK_PROBE_CANDIDATE(ref_coop_128x256_c2x1, 128, 256, 2, 1, cooperative, ab)
