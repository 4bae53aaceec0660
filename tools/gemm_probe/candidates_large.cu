// Candidates with large cooperative tiles fitted to one wave.
#include "candidate.cuh"

TILELINK_PROBE_CANDIDATE(coop_256x144_c2x1, 256, 144, 2, 1, cooperative, ab)
TILELINK_PROBE_CANDIDATE(coop_128x224_c2x1, 128, 224, 2, 1, cooperative, ab)
