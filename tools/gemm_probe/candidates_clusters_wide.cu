// Candidates with 2x2 clusters on the engine's wide tiles: each A tile multicast along N and each
// B tile along M, as the engine's 64x128, 128x128 and swapped 128x96 tiles run at 64-4095 rows.
#include "candidate.cuh"

TILELINK_PROBE_CANDIDATE(pp_128x192_c2x2, 128, 192, 2, 2, pingpong, ab)
TILELINK_PROBE_CANDIDATE(coop_128x256_c2x2, 128, 256, 2, 2, cooperative, ab)
