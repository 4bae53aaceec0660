// 64-row swapped tiles 48 and 80 of A's rows wide in clusters of eight (four along the weights,
// two along A's rows), for tens to hundreds of rows: the vendor's tiles there are 40-72 wide in
// 2x4 clusters. The 48-wide one also at CUTLASS's own store step (16 columns), for the A/B.
#include "candidate.cuh"

TILELINK_PROBE_CANDIDATE(ppba_64x48_c4x2, 64, 48, 4, 2, pingpong, ba)
TILELINK_PROBE_CANDIDATE_EPI(ppba_64x48_c4x2_e48, 64, 48, 4, 2, pingpong, ba, 48)
TILELINK_PROBE_CANDIDATE_EPI(ppba_64x80_c4x2_e80, 64, 80, 4, 2, pingpong, ba, 80)
