// Candidates with clusters of four CTAs on the engine's wide tiles, and on a swapped tile for
// tens to hundreds of rows.
#include "candidate.cuh"

TILELINK_PROBE_CANDIDATE(pp_128x192_c4x1, 128, 192, 4, 1, pingpong, ab)
TILELINK_PROBE_CANDIDATE(coop_128x256_c4x1, 128, 256, 4, 1, cooperative, ab)
TILELINK_PROBE_CANDIDATE(ppba_128x96_c2x2, 128, 96, 2, 2, pingpong, ba)
