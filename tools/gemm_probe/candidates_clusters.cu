// Candidates with clusters of four and eight CTAs: each operand tile multicast to the CTAs of a
// cluster row or column, as the vendor's kernels run narrow grids at tens to thousands of rows
// (clusters of 4x1 and 4x2), against the engine's clusters of at most two.
#include "candidate.cuh"

TILELINK_PROBE_CANDIDATE(pp_64x128_c4x2, 64, 128, 4, 2, pingpong, ab)
TILELINK_PROBE_CANDIDATE(pp_64x128_c2x2, 64, 128, 2, 2, pingpong, ab)
TILELINK_PROBE_CANDIDATE(pp_128x128_c2x2, 128, 128, 2, 2, pingpong, ab)
