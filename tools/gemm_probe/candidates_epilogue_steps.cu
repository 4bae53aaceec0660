// Swapped tiles whose width (A's rows per tile) is an odd multiple of 16, with the epilogue's
// store step set to a wider divisor of the width: CUTLASS's own choice for them is 16 columns a
// step (gcd(32, width)), which the earlier probes of these widths ran with. Each `_eN` candidate
// beside its twin at CUTLASS's step shows what the step alone costs. The 256x144 tile in a 1x2
// cluster stands for the vendor's 152x256 in 2x1 at ~900-1800 rows and deep K.
#include "candidate.cuh"

TILELINK_PROBE_CANDIDATE_EPI(ppba_128x144_c2x1_e48, 128, 144, 2, 1, pingpong, ba, 48)
TILELINK_PROBE_CANDIDATE_EPI(ppba_128x176_c2x1_e176, 128, 176, 2, 1, pingpong, ba, 176)
TILELINK_PROBE_CANDIDATE_EPI(cpba_128x240_c2x1_e80, 128, 240, 2, 1, cooperative, ba, 80)
TILELINK_PROBE_CANDIDATE_EPI(cpba_256x144_c1x2_e48, 256, 144, 1, 2, cooperative, ba, 48)
