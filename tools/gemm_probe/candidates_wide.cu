// Candidates whose width puts a mid-sized GEMM into one wave of 132 SMs.
#include "candidate.cuh"

TILELINK_PROBE_CANDIDATE(pp_128x80_c2x1, 128, 80, 2, 1, pingpong, ab)
TILELINK_PROBE_CANDIDATE(ppba_128x160_c2x1, 128, 160, 2, 1, pingpong, ba)
TILELINK_PROBE_CANDIDATE(coop_128x144_c1x1, 128, 144, 1, 1, cooperative, ab)
