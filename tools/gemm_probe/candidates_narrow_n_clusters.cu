// A 160-wide ping-pong tile in a 2x2 cluster, for thousands of rows and N just above a multiple
// of 128 or 256 (N = 264 pads to 384 columns on 192-wide tiles, to 320 here): the 2x1 twin was
// bound by L2 (its K step cost what the 192-wide tile's does); sharing both operands in a 2x2
// cluster cuts the bytes a CTA reads per K step from 26 to 18 KiB.
#include "candidate.cuh"

TILELINK_PROBE_CANDIDATE(pp_128x160_c2x2, 128, 160, 2, 2, pingpong, ab)
