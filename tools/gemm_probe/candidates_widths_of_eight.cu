// Swapped tiles whose width (A's rows per tile) is a multiple of 8 but not of 16 — the vendor's
// widths on many shapes where the engine loses (40-72 wide at tens to hundreds of rows, 152 x 256
// in 2x1 at ~900-1800) — with A's rows unswizzled in shared memory (candidate.cuh says why), each
// with the epilogue that stores from registers and the 72-wide one also with the TMA epilogue at
// CUTLASS's own 8-column step. No cluster along the weights: a multicast A's-rows tile is cut
// into one slice per CTA of the cluster, and 56 or 72 rows do not cut into whole 8-row slices.
#include "candidate.cuh"

TILELINK_PROBE_CANDIDATE_DIRECT(ppba_64x56_c1x2_direct, 64, 56, 1, 2, pingpong, ba)
TILELINK_PROBE_CANDIDATE_DIRECT(ppba_128x72_c1x1_direct, 128, 72, 1, 1, pingpong, ba)
TILELINK_PROBE_CANDIDATE(ppba_128x72_c1x1, 128, 72, 1, 1, pingpong, ba)
TILELINK_PROBE_CANDIDATE_DIRECT(cpba_256x152_c1x2_direct, 256, 152, 1, 2, cooperative, ba)
