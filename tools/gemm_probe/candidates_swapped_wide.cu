// Swapped cooperative candidates 208-256 of A's rows wide (see candidates_swapped_widths.cu).
#include "candidate.cuh"

TILELINK_PROBE_CANDIDATE(cpba_128x208_c2x1, 128, 208, 2, 1, cooperative, ba)
TILELINK_PROBE_CANDIDATE(cpba_128x240_c2x1, 128, 240, 2, 1, cooperative, ba)
TILELINK_PROBE_CANDIDATE(cpba_128x256_c2x1, 128, 256, 2, 1, cooperative, ba)
