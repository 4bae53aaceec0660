// tilelink/ll.cuh — every low-level device primitive (docs/PRIMITIVES.md lists them with their
// memory order and scope).
#pragma once

#include "tilelink/ll/team.cuh"          // Team, WaitReport, Cmp, kMaxLocalRanks, kMaxWorldRanks
#include "tilelink/ll/identity.cuh"      // rank, num_ranks, symm_at, owner_of
#include "tilelink/ll/timer.cuh"         // globaltimer, smid
#include "tilelink/ll/memory_order.cuh"  // ld/st/red/atomic/fence with order + scope
#include "tilelink/ll/signal.cuh"        // signal_op, signal_wait_until (bounded)
#include "tilelink/ll/data.cuh"          // putmem/getmem (+_nbi, _warp, _block), putmem_signal
#include "tilelink/ll/flagged.cuh"       // data and flag in one store (low-latency protocol)
#include "tilelink/ll/tma.cuh"           // TMA bulk copies, mbarriers, putmem/getmem_tma_block
#include "tilelink/ll/sync.cuh"          // fence, quiet, barrier_all, sync_all
#include "tilelink/ll/multimem.cuh"      // declared only: NVLS is off
