// Swapped candidates in clusters along A's rows for 64-511 rows and wide N: each weight tile
// multicast to the CTAs of two or four tile columns, so one cluster holds 384-512 of A's rows and
// all of B is read once, where the engine's swapped tiles over two or more columns read B once
// per column (cuBLASLt runs 4- and 8-CTA clusters at these rows).
#include "candidate.cuh"

TILELINK_PROBE_CANDIDATE(cpba_128x192_c1x2, 128, 192, 1, 2, cooperative, ba)
TILELINK_PROBE_CANDIDATE(cpba_128x256_c1x2, 128, 256, 1, 2, cooperative, ba)
TILELINK_PROBE_CANDIDATE(ppba_128x96_c1x4, 128, 96, 1, 4, pingpong, ba)
