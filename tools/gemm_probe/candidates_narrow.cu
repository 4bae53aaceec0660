// Candidates with 64-row tiles: unswapped, and swapped for a few hundred columns of N.
#include "candidate.cuh"

TILELINK_PROBE_CANDIDATE(pp_64x64_c2x1, 64, 64, 2, 1, pingpong, ab)
TILELINK_PROBE_CANDIDATE(ppba_64x64_c1x1, 64, 64, 1, 1, pingpong, ba)
TILELINK_PROBE_CANDIDATE(pp_64x96_c1x2, 64, 96, 1, 2, pingpong, ab)
