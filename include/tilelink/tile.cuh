// tilelink/tile.cuh — the tile-centric layer: mappings, tile orders, the signal and data
// primitives (on the device and in stream order), and their binding to the GEMM engine's hooks.
#pragma once

#include "tilelink/tile/data.cuh"
#include "tilelink/tile/flagged.cuh"
#include "tilelink/tile/gemm_hooks.cuh"
#include "tilelink/tile/mapping.cuh"
#include "tilelink/tile/order.cuh"
#include "tilelink/tile/signal.cuh"
#include "tilelink/tile/stream_signal.cuh"
