// The tile layer's primitives (tile/signal.cuh, data.cuh, mapping.cuh, coop.cuh) on in-process
// worlds of 1 to 8 ranks: tile_push_data + consumer_tile_wait (full and lean spin) over regions of a
// RowChunkMapping; peer_view + peer_tile_notify (to one rank and to a RankSet) / peer_tile_wait;
// rank_notify / rank_wait + tile_pull_data + reads_done_notify / reads_done_wait; and the counting
// signals (count_arm / count_notify / count_wait). Between them the cooperation scopes Thread,
// Warp, WarpSpan and Block all take part.
//
// Every test makes several calls per shape in a row on the same signal slots (the epoch advances,
// nothing is reset; shapes change the slot layout between calls), with fresh random data per call,
// outputs poisoned first. Consumers copy what they waited for into a plain buffer right after the
// wait, and producers start late, so a signal that is missing, early or raised in the wrong slot
// shows up as poison in the bitwise check; the slots must then hold exactly the call's epoch.
// Calls take their epoch from the host (Context::begin_op(op)) and, in worlds of several ranks,
// from the device word their stream advances (begin_op(op, stream)), as the ops' calls do.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "gpu/common/gpu_test.hpp"
#include "tilelink/ll.cuh"
#include "tilelink/tile/coop.cuh"
#include "tilelink/tile/data.cuh"
#include "tilelink/tile/mapping.cuh"
#include "tilelink/tile/signal.cuh"

namespace ll = tilelink::ll;
namespace tile = tilelink::tile;
namespace tt = tilelink::test;
using tilelink::Context;

namespace {

// ---- shapes, buffers, calls --------------------------------------------------------------------
struct Shape {
  int32_t rows_per_rank;  // a rank's band of the symmetric tensor
  int32_t chunk_rows;     // rows per tile (a band's last tile may be shorter)
  int64_t row_bytes;
};
constexpr Shape kShapes[] = {
    {5, 1, 16},       // one row per tile
    {7, 3, 48},       // a short last tile: 3 + 3 + 1
    {9, 3, 24},       // rows of no multiple of 16 bytes (the copies take any alignment)
    {40, 17, 4096},   // 17 + 17 + 6
    {64, 64, 4096},   // one tile per rank
    {33, 17, 12288},  // 17 + 16, large rows
};
constexpr int kCallsPerShape = 3;

constexpr int64_t band_bytes(const Shape& s) { return int64_t(s.rows_per_rank) * s.row_bytes; }
constexpr int32_t tiles_per_rank(const Shape& s) { return (s.rows_per_rank + s.chunk_rows - 1) / s.chunk_rows; }
constexpr int64_t max_band_bytes() {
  int64_t m = 0;
  for (const Shape& s : kShapes) m = std::max(m, band_bytes(s));
  return m;
}
constexpr int32_t max_tiles_per_rank() {
  int32_t m = 0;
  for (const Shape& s : kShapes) m = std::max(m, tiles_per_rank(s));
  return m;
}
constexpr bool rows_are_words() {
  for (const Shape& s : kShapes)
    if (s.row_bytes % 8 != 0) return false;
  return true;
}
// The kernels below generate and copy rows as 8-byte words of the random pattern.
static_assert(rows_are_words(), "row_bytes must be a multiple of 8");

constexpr int64_t kMaxBand = max_band_bytes();
constexpr int64_t kMaxTensor = kMaxBand * ll::kMaxLocalRanks;  // the gathered tensor of any world
constexpr int32_t kMaxTiles = max_tiles_per_rank() * ll::kMaxLocalRanks;
constexpr unsigned kThreads = 256;

char* workspace(Context& ctx, const char* key, int64_t bytes) {
  return static_cast<char*>(ctx.symmetric_workspace(key, size_t(bytes)));
}

// How a call gets its epoch: from the host (Team::epoch, by value), or from the device word its
// stream advances (Team::epoch_word), which op calls and graph replays use. (A world of one rank
// signals nobody: begin_op(op, stream) launches nothing there and the kernels read the host's
// count, which the stream form then checks too.)
enum class Epoch { host, stream };
const char* epoch_name(Epoch e) { return e == Epoch::host ? "host epoch" : "stream epoch"; }
constexpr Epoch kEpochModes[] = {Epoch::host, Epoch::stream};

// Begins a call; the Team carries its epoch (read it after begin_op).
ll::Team begin_call(Context& ctx, const char* op, Epoch mode) {
  if (mode == Epoch::stream) ctx.begin_op(op, ctx.stream());
  else ctx.begin_op(op);
  return ctx.team();
}

// The epoch the call's kernels compared with (ll::call_epoch); synchronizes the stream.
uint64_t epoch_of(Context& ctx, const ll::Team& team) {
  return team.epoch_word != nullptr ? tt::download_n(team.epoch_word, 1, ctx.stream())[0] : team.epoch;
}

// Runs body(mode, shape, call) for every epoch mode, shape and repeat, numbering the calls.
template <class Body>
void for_each_call(Body&& body) {
  uint64_t call = 0;
  for (Epoch mode : kEpochModes)
    for (const Shape& s : kShapes)
      for (int k = 0; k < kCallsPerShape; ++k) body(mode, s, call++);
}

// Blocks per role of a kernel (producers, consumers): two where the rank's SM share allows.
int32_t blocks_per_role(const Context& ctx) { return std::max(1, std::min(2, ctx.sm_count() / 2)); }

std::string describe(const char* test, Epoch mode, const Shape& s, int rank, uint64_t call) {
  std::ostringstream os;
  os << test << " (" << epoch_name(mode) << ") rank " << rank << " call " << call << ", shape "
     << s.rows_per_rank << " rows/rank, " << s.chunk_rows << " rows/tile, " << s.row_bytes << " B/row";
  return os.str();
}

// Slots [0, used) must hold exactly `epoch` (raised by max, never past it); slots [used, count),
// which this call's mapping does not name, something older.
void expect_slots(Context& ctx, const uint64_t* slots, int used, int count, uint64_t epoch, const std::string& what) {
  const auto values = tt::download_n(slots, size_t(count), ctx.stream());
  for (int s = 0; s < count; ++s) {
    if (s < used) EXPECT_EQ(values[size_t(s)], epoch) << what << ": slot " << s << " of " << used;
    else EXPECT_LT(values[size_t(s)], epoch) << what << ": slot " << s << " (not used by this call) was raised";
  }
}

// Each rank's band of this call, as the host predicts it (the pattern of mix_seed(seed, r, call)).
void expect_bands(const std::vector<uint8_t>& got, int ranks, int64_t band, uint64_t seed, uint64_t call,
                  const std::string& what) {
  for (int r = 0; r < ranks; ++r) {
    const auto want = tt::random_bytes(size_t(band), tt::mix_seed(seed, r, call));
    EXPECT_TRUE(tt::bytes_equal(want.data(), got.data() + int64_t(r) * band, size_t(band),
                                what + ": band of rank " + std::to_string(r)));
  }
}

// ---- device helpers -----------------------------------------------------------------------------
// Producers start this late, so the waits mostly begin before anything arrived.
constexpr uint64_t kProducerDelayNs = 20000;
__device__ void stall_ns(uint64_t ns) {
  const uint64_t t0 = ll::globaltimer();
  while (ll::globaltimer() - t0 < ns) {
  }
}

// Rows `rr` of a row-major tensor from src to dst, split over the scope (8-byte words).
template <class C>
__device__ void copy_rows(C coop, char* dst, const char* src, tile::RowRange rr, int64_t row_bytes) {
  const auto* s = reinterpret_cast<const uint64_t*>(src + rr.begin * row_bytes);
  auto* d = reinterpret_cast<uint64_t*>(dst + rr.begin * row_bytes);
  const int64_t words = int64_t(rr.count) * row_bytes / 8;
  for (int64_t i = coop.rank(); i < words; i += coop.size()) d[i] = s[i];
}

// Bytes [first, end) of the pattern of `seed`, computed here, into dst (pattern byte i at dst + i;
// first and end multiples of 8), split over the scope.
template <class C>
__device__ void write_pattern(C coop, char* dst, uint64_t seed, int64_t first, int64_t end) {
  auto* d = reinterpret_cast<uint64_t*>(dst);
  for (int64_t w = first / 8 + coop.rank(); w < end / 8; w += coop.size()) d[w] = tt::random_word(seed, uint64_t(w));
}

// Consumer regions, by whole blocks: consecutive row ranges of `region_rows` over the gathered
// tensor, sized to straddle the bands of two ranks and to start inside tiles. Block `c` of
// `consumers` takes the last ones first (the tiles the ring delivers last), and waits with either
// spin (the lean one is what a GEMM's producer warp uses).
__device__ void consume_regions(const ll::Team& team, const tile::RowChunkMapping& map, const uint64_t* signals,
                                const char* gathered, char* out, int64_t row_bytes, int32_t region_rows, int32_t c,
                                int32_t consumers) {
  const tile::Block block{};
  const int32_t rows = team.num_ranks * map.rows_per_rank, regions = tile::ceil_div(rows, region_rows);
  for (int32_t k = c; k < regions; k += consumers) {
    const int32_t first = (regions - 1 - k) * region_rows;
    const tile::RowRange region{first, rows - first < region_rows ? rows - first : region_rows};
    if (k % 2 == 0) tile::consumer_tile_wait(block, team, map, signals, region);
    else tile::consumer_tile_wait<tile::Spin::lean>(block, team, map, signals, region);
    copy_rows(block, out, gathered, region, row_bytes);
  }
}

// ---- push, then consume regions ----------------------------------------------------------------
struct PushParams {
  ll::Team team;
  tile::RowChunkMapping map;
  char* gathered;         // symmetric [ranks x rows_per_rank rows]: every rank pushes its band here
  const char* band;       // this rank's rows
  int64_t row_bytes;
  uint64_t* signals;      // symmetric, one slot per tile
  char* out;              // what the consumers read right after their waits
  int32_t producers;      // blocks [0, producers) push, the others consume
  int32_t region_rows;
};

__global__ void __launch_bounds__(kThreads) push_consume_kernel(const PushParams p) {
  const int32_t me = p.team.rank, n = p.team.num_ranks, chunks = p.map.chunks_per_rank;
  const int32_t b = int32_t(blockIdx.x);
  if (b < p.producers) {
    stall_ns(kProducerDelayNs);
    // Destinations in ring order from the next rank, this rank last.
    for (int32_t item = b; item < n * chunks; item += p.producers) {
      const int32_t to = (me + 1 + item / chunks) % n, chunk = item % chunks;
      tile::tile_push_data(tile::Block{}, p.team, p.map, p.map.tile(me, chunk), p.gathered, p.band,
                           int64_t(me) * p.map.rows_per_rank, p.row_bytes, p.signals, to);
    }
    return;
  }
  consume_regions(p.team, p.map, p.signals, p.gathered, p.out, p.row_bytes, p.region_rows, b - p.producers,
                  int32_t(gridDim.x) - p.producers);
}

class TilePrimitives : public tt::WorldSizeTest {};

// Every rank pushes each tile of its band to every rank (tile_push_data, Block); on every rank,
// consumer blocks wait for regions spanning tiles of several ranks (consumer_tile_wait, both
// spins) and copy them out. The copies must be every rank's band, the tile slots exactly the epoch.
TEST_P(TilePrimitives, PushThenConsumeRegions) {
  const uint64_t seed = tt::fresh_seed();
  SCOPED_TRACE(tt::seed_trace(seed));
  world().run([&](Context& ctx) {
    SCOPED_TRACE(tt::seed_trace(seed));  // per thread: rank threads report their own failures
    const int me = ctx.rank(), n = ctx.num_ranks();
    char* band = workspace(ctx, "tile.test.push.band", kMaxBand);
    char* gathered = workspace(ctx, "tile.test.push.gathered", kMaxTensor);
    char* out = workspace(ctx, "tile.test.push.out", kMaxTensor);
    uint64_t* signals = ctx.signal_workspace("tile.test.push.signals", kMaxTiles);
    const int32_t half = blocks_per_role(ctx);
    for_each_call([&](Epoch mode, const Shape& s, uint64_t call) {
      const auto map = tile::RowChunkMapping::make(s.rows_per_rank, s.chunk_rows, n);
      const int64_t bytes = n * band_bytes(s);
      tt::fill_random_device(band, size_t(band_bytes(s)), tt::mix_seed(seed, me, call), ctx.stream());
      tt::poison_device(gathered, size_t(bytes), 0xA5, ctx.stream());
      tt::poison_device(out, size_t(bytes), 0x5A, ctx.stream());
      ctx.synchronize("tile_push_test data");
      ctx.barrier();  // every gathered tensor is poisoned before any rank pushes into it
      const ll::Team team = begin_call(ctx, "tile_push_test", mode);
      const PushParams p{team, map, gathered, band, s.row_bytes, signals, out, half,
                         s.rows_per_rank + s.chunk_rows / 2 + 1};
      push_consume_kernel<<<unsigned(2 * half), kThreads, 0, ctx.stream()>>>(p);
      tt::check_launch("push_consume_kernel");
      ctx.synchronize("tile_push_test");
      ctx.barrier();  // every push into this rank is done
      const std::string what = describe("push/consume", mode, s, me, call);
      expect_bands(tt::download(out, size_t(bytes), ctx.stream()), n, band_bytes(s), seed, call,
                   what + ", read after consumer_tile_wait");
      expect_slots(ctx, signals, map.num_tiles(), kMaxTiles, epoch_of(ctx, team), what + ": tile slots");
    });
  });
}

// ---- peer_view, peer_tile_notify / peer_tile_wait ----------------------------------------------
struct PeerParams {
  ll::Team team;
  tile::RowChunkMapping map;  // one band in tiles (a world of one): rows(t) are rows of the band
  char* inbox;                // symmetric [ranks][band]: part s holds what rank s wrote here
  char* out;                  // what the readers copied right after their waits
  int64_t row_bytes;
  int64_t band_bytes;
  uint64_t* peer_signals;     // symmetric, one slot per (tile, source rank)
  uint64_t seed;              // this rank's pattern for this call
  int32_t writers;            // blocks [0, writers) write to peers, the others read
};

__global__ void __launch_bounds__(kThreads) peer_view_kernel(const PeerParams p) {
  const int32_t me = p.team.rank, n = p.team.num_ranks, tiles = p.map.num_tiles();
  const int32_t b = int32_t(blockIdx.x);
  if (b < p.writers) {
    // Writers are warps; tile t goes to warp t / writers of writer block t % writers.
    const tile::Warp warp{};
    const int32_t warps = int32_t(blockDim.x / 32);
    stall_ns(kProducerDelayNs);
    for (int32_t t = int32_t(threadIdx.x / 32) * p.writers + b; t < tiles; t += p.writers * warps) {
      const tile::RowRange rr = p.map.rows(t);
      const int64_t lo = rr.begin * p.row_bytes, hi = rr.end() * p.row_bytes;
      // My part of dst's inbox, where dst maps it: the tile is computed straight into it.
      auto part_at = [&](int32_t dst) { return tile::peer_view(p.team, p.inbox + int64_t(me) * p.band_bytes, dst); };
      if (t % 2 == 0) {
        // One notify per destination, in ring order (this rank last).
        for (int32_t k = 1; k <= n; ++k) {
          const int32_t dst = (me + k) % n;
          write_pattern(warp, part_at(dst), p.seed, lo, hi);
          tile::peer_tile_notify(warp, p.team, p.map, p.peer_signals, t, dst);
        }
      } else {
        // Every peer's copy, then one notify to all of them (a RankSet without this rank), then
        // this rank's own.
        for (int32_t k = 1; k < n; ++k) write_pattern(warp, part_at((me + k) % n), p.seed, lo, hi);
        tile::peer_tile_notify(warp, p.team, p.map, p.peer_signals, t, tile::RankSet{0, n - 1, me});
        write_pattern(warp, part_at(me), p.seed, lo, hi);
        tile::peer_tile_notify(warp, p.team, p.map, p.peer_signals, t, me);
      }
    }
    return;
  }
  // Readers are blocks; they wait as a Block, or on one thread then sync the block themselves.
  const tile::Block block{};
  const int32_t readers = int32_t(gridDim.x) - p.writers;
  for (int32_t item = b - p.writers; item < n * tiles; item += readers) {
    const int32_t src = n - 1 - item / tiles, t = item % tiles;  // the last writers' tiles first
    if (item % 2 == 0) {
      tile::peer_tile_wait(block, p.team, p.map, p.peer_signals, t, src);
    } else {
      if (threadIdx.x == 0) tile::peer_tile_wait(tile::Thread{}, p.team, p.map, p.peer_signals, t, src);
      __syncthreads();
    }
    const int64_t offset = int64_t(src) * p.band_bytes;
    copy_rows(block, p.out + offset, p.inbox + offset, p.map.rows(t), p.row_bytes);
  }
}

// Every rank computes its band tile by tile into its part of every rank's inbox (peer_view, by
// warps) and publishes each tile there (peer_tile_notify, to one rank or to a RankSet); reader
// blocks wait for each (tile, source) (peer_tile_wait) and copy it out.
TEST_P(TilePrimitives, PeerViewNotifyWait) {
  const uint64_t seed = tt::fresh_seed();
  SCOPED_TRACE(tt::seed_trace(seed));
  world().run([&](Context& ctx) {
    SCOPED_TRACE(tt::seed_trace(seed));
    const int me = ctx.rank(), n = ctx.num_ranks();
    char* inbox = workspace(ctx, "tile.test.peer.inbox", kMaxTensor);
    char* out = workspace(ctx, "tile.test.peer.out", kMaxTensor);
    uint64_t* peer_signals = ctx.signal_workspace("tile.test.peer.signals", kMaxTiles);
    const int32_t half = blocks_per_role(ctx);
    for_each_call([&](Epoch mode, const Shape& s, uint64_t call) {
      const auto map = tile::RowChunkMapping::make(s.rows_per_rank, s.chunk_rows, 1);
      const int64_t bytes = n * band_bytes(s);
      tt::poison_device(inbox, size_t(bytes), 0xA5, ctx.stream());
      tt::poison_device(out, size_t(bytes), 0x5A, ctx.stream());
      ctx.synchronize("tile_peer_test data");
      ctx.barrier();  // every inbox is poisoned before any rank writes into it
      const ll::Team team = begin_call(ctx, "tile_peer_test", mode);
      const PeerParams p{team, map, inbox, out, s.row_bytes, band_bytes(s), peer_signals,
                         tt::mix_seed(seed, me, call), half};
      peer_view_kernel<<<unsigned(2 * half), kThreads, 0, ctx.stream()>>>(p);
      tt::check_launch("peer_view_kernel");
      ctx.synchronize("tile_peer_test");
      ctx.barrier();  // every write into this rank's inbox is done
      const std::string what = describe("peer_view/notify/wait", mode, s, me, call);
      expect_bands(tt::download(out, size_t(bytes), ctx.stream()), n, band_bytes(s), seed, call,
                   what + ", read after peer_tile_wait");
      expect_slots(ctx, peer_signals, map.num_tiles() * n, kMaxTiles, epoch_of(ctx, team),
                   what + ": (tile, source) slots");
    });
  });
}

// ---- rank_notify / rank_wait, pull, reads done ---------------------------------------------------
struct PullParams {
  ll::Team team;
  tile::RowChunkMapping map;
  char* gathered;          // symmetric: block 0 writes this rank's band, pullers fetch the others
  char* out;               // what the consumers read right after their waits
  int64_t row_bytes;
  uint64_t* rank_signals;  // symmetric, one slot per rank: "my band is in place"
  uint64_t* tile_signals;  // this rank's tiles of the gathered tensor (pulled, or written here)
  uint64_t* reads_done;    // symmetric counter: pulls of this rank's band that finished
  uint64_t seed;           // this rank's pattern for this call
  int32_t pullers;         // blocks [1, 1 + pullers) pull, the others consume
  int32_t region_rows;
};

constexpr int32_t kPullSpanWarps = 4;  // pullers: spans of 4 warps, named barriers 1, 2, ...

__global__ void __launch_bounds__(kThreads) rank_pull_kernel(const PullParams p) {
  const int32_t me = p.team.rank, n = p.team.num_ranks, chunks = p.map.chunks_per_rank;
  const int64_t band = int64_t(p.map.rows_per_rank) * p.row_bytes;
  const int32_t b = int32_t(blockIdx.x);
  if (b == 0) {
    // The owner: computes its band, releases its own tiles here and the band to every rank (each
    // notify syncs the block first, and fences before a remote release), then keeps the band until
    // every peer's pull of every tile of it is done.
    const tile::Block block{};
    stall_ns(kProducerDelayNs);
    write_pattern(block, p.gathered + int64_t(me) * band, p.seed, 0, band);
    for (int32_t c = 0; c < chunks; ++c)
      tile::producer_tile_notify<tile::Notify::local>(block, p.team, p.map, p.tile_signals, p.map.tile(me, c));
    for (int32_t k = 1; k <= n; ++k) tile::rank_notify(block, p.team, p.rank_signals, (me + k) % n);
    tile::reads_done_wait(block, p.team, p.reads_done, uint64_t(n - 1) * uint64_t(chunks));
    return;
  }
  if (b <= p.pullers) {
    const tile::WarpSpan span = tile::WarpSpan::of_block(kPullSpanWarps, 1);
    const int32_t spans = int32_t(blockDim.x) / span.lanes;
    const int32_t first = (b - 1) + p.pullers * (int32_t(threadIdx.x) / span.lanes);
    for (int32_t item = first; item < (n - 1) * chunks; item += p.pullers * spans) {
      const int32_t from = (me + 1 + item / chunks) % n, chunk = item % chunks;
      tile::rank_wait(span, p.team, p.rank_signals, from);
      tile::tile_pull_data(span, p.team, p.map, p.map.tile(from, chunk), p.gathered, p.gathered, p.row_bytes,
                           p.tile_signals, from);
      tile::reads_done_notify(span, p.team, p.reads_done, from);
    }
    return;
  }
  consume_regions(p.team, p.map, p.tile_signals, p.gathered, p.out, p.row_bytes, p.region_rows, b - 1 - p.pullers,
                  int32_t(gridDim.x) - 1 - p.pullers);
}

// Every rank computes its band into its part of the gathered tensor and tells every rank
// (rank_notify, Block); the others wait for it (rank_wait) and pull its tiles (tile_pull_data,
// which releases each pulled tile here), by spans of warps, and count each pull done at the owner
// (reads_done_notify), who waits for all of them (reads_done_wait); consumer blocks wait for
// regions of the pulled tiles and copy them out.
TEST_P(TilePrimitives, RankNotifyThenPull) {
  static_assert(kThreads % (32 * kPullSpanWarps) == 0 && kThreads / (32 * kPullSpanWarps) <= 15,
                "pull spans: whole spans per block, one named barrier each");
  const uint64_t seed = tt::fresh_seed();
  SCOPED_TRACE(tt::seed_trace(seed));
  world().run([&](Context& ctx) {
    SCOPED_TRACE(tt::seed_trace(seed));
    const int me = ctx.rank(), n = ctx.num_ranks();
    char* gathered = workspace(ctx, "tile.test.pull.gathered", kMaxTensor);
    char* out = workspace(ctx, "tile.test.pull.out", kMaxTensor);
    uint64_t* rank_signals = ctx.signal_workspace("tile.test.pull.ranks", ll::kMaxLocalRanks);
    uint64_t* tile_signals = ctx.signal_workspace("tile.test.pull.tiles", kMaxTiles);
    uint64_t* reads_done = ctx.signal_workspace("tile.test.pull.reads_done", 1);
    const int32_t half = blocks_per_role(ctx);
    for_each_call([&](Epoch mode, const Shape& s, uint64_t call) {
      const auto map = tile::RowChunkMapping::make(s.rows_per_rank, s.chunk_rows, n);
      const int64_t bytes = n * band_bytes(s);
      tt::poison_device(gathered, size_t(bytes), 0xA5, ctx.stream());
      tt::poison_device(out, size_t(bytes), 0x5A, ctx.stream());
      ctx.synchronize("tile_pull_test data");
      ctx.barrier();  // every gathered tensor is poisoned before any band is written
      const ll::Team team = begin_call(ctx, "tile_pull_test", mode);
      const PullParams p{team, map, gathered, out, s.row_bytes, rank_signals, tile_signals, reads_done,
                         tt::mix_seed(seed, me, call), half, s.rows_per_rank + s.chunk_rows / 2 + 1};
      rank_pull_kernel<<<unsigned(1 + 2 * half), kThreads, 0, ctx.stream()>>>(p);
      tt::check_launch("rank_pull_kernel");
      ctx.synchronize("tile_pull_test");
      ctx.barrier();  // every pull from this rank is done
      const std::string what = describe("rank_notify/pull", mode, s, me, call);
      expect_bands(tt::download(out, size_t(bytes), ctx.stream()), n, band_bytes(s), seed, call,
                   what + ", read after consumer_tile_wait");
      const uint64_t epoch = epoch_of(ctx, team);
      expect_slots(ctx, rank_signals, n, ll::kMaxLocalRanks, epoch, what + ": rank slots");
      expect_slots(ctx, tile_signals, map.num_tiles(), kMaxTiles, epoch, what + ": tile slots");
      EXPECT_EQ(tt::download_n(reads_done, 1, ctx.stream())[0], 0u)
          << what << ": reads_done_wait must take every pull it counted off again";
    });
  });
}

// ---- counting signals --------------------------------------------------------------------------
struct CountCase {
  uint32_t producers;  // blocks that each write a part and count themselves done
  int64_t part_bytes;
};
// Counts rise and fall between cases, so a count left by the previous call (with an arm that did
// not take, or an epoch missing from the armed value) would satisfy a later wait early.
constexpr CountCase kCountCases[] = {{6, 4096}, {2, 48}, {5, 16}, {1, 12288}, {8, 24}, {3, 4101}};
constexpr int64_t kMaxCountBytes = 8 * 12288;

__global__ void count_arm_kernel(const ll::Team team, uint64_t* counter) {
  tile::count_arm(tile::Thread{}, team, counter);
}

// Block b writes bytes [b x part, (b+1) x part) of the pattern, then counts itself done. Blocks
// finish at staggered times: the last one decides when the wait may return.
__global__ void __launch_bounds__(kThreads) count_produce_kernel(char* data, int64_t part_bytes, uint64_t seed,
                                                                  uint64_t* counter) {
  stall_ns(kProducerDelayNs + 5000 * blockIdx.x);
  const int64_t first = int64_t(blockIdx.x) * part_bytes;
  for (int64_t i = first + threadIdx.x; i < first + part_bytes; i += blockDim.x)
    data[i] = char(tt::random_byte(seed, uint64_t(i)));
  tile::count_notify(tile::Block{}, counter);
}

__global__ void __launch_bounds__(kThreads) count_consume_kernel(const ll::Team team, const char* data, char* out,
                                                                  int64_t bytes, uint32_t producers,
                                                                  const uint64_t* counter, int32_t site) {
  tile::count_wait(tile::Block{}, team, counter, producers, site);
  for (int64_t i = threadIdx.x; i < bytes; i += blockDim.x) out[i] = data[i];
}

struct Event {
  cudaEvent_t e = nullptr;
  Event() { TL_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming)); }
  ~Event() { (void)cudaEventDestroy(e); }  // unchecked: a destructor must not throw
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};

// Per call: count_arm in stream order (one thread), then the consumer on the side stream (it waits
// for the arm only) and a grid of N producers on the stream, running side by side; the consumer
// waits for N (count_wait) and copies the data out. N changes between cases on the same counter.
TEST_P(TilePrimitives, CountsPerCall) {
  const uint64_t seed = tt::fresh_seed();
  SCOPED_TRACE(tt::seed_trace(seed));
  world().run([&](Context& ctx) {
    SCOPED_TRACE(tt::seed_trace(seed));
    const int me = ctx.rank();
    char* data = workspace(ctx, "tile.test.count.data", kMaxCountBytes);
    char* out = workspace(ctx, "tile.test.count.out", kMaxCountBytes);
    uint64_t* counter = ctx.signal_workspace("tile.test.count.counter", 1);
    const Event armed, consumed;
    uint64_t call = 0;
    for (Epoch mode : kEpochModes)
      for (int c = 0; c < int(std::size(kCountCases)); ++c)
        for (int k = 0; k < kCallsPerShape; ++k, ++call) {
          const CountCase& cc = kCountCases[c];
          const int64_t bytes = int64_t(cc.producers) * cc.part_bytes;
          const uint64_t call_seed = tt::mix_seed(seed, me, call);
          tt::poison_device(data, size_t(bytes), 0xA5, ctx.stream());
          tt::poison_device(out, size_t(bytes), 0x5A, ctx.stream());
          const ll::Team team = begin_call(ctx, "tile_count_test", mode);
          count_arm_kernel<<<1, 1, 0, ctx.stream()>>>(team, counter);
          tt::check_launch("count_arm_kernel");
          TL_CUDA_CHECK(cudaEventRecord(armed.e, ctx.stream()));
          TL_CUDA_CHECK(cudaStreamWaitEvent(ctx.side_stream(), armed.e, 0));
          count_consume_kernel<<<1, kThreads, 0, ctx.side_stream()>>>(team, data, out, bytes, cc.producers, counter, c);
          tt::check_launch("count_consume_kernel");
          count_produce_kernel<<<cc.producers, kThreads, 0, ctx.stream()>>>(data, cc.part_bytes, call_seed, counter);
          tt::check_launch("count_produce_kernel");
          TL_CUDA_CHECK(cudaEventRecord(consumed.e, ctx.side_stream()));
          TL_CUDA_CHECK(cudaStreamWaitEvent(ctx.stream(), consumed.e, 0));
          ctx.synchronize("tile_count_test");
          std::ostringstream what;
          what << "count (" << epoch_name(mode) << ") rank " << me << " call " << call << ", " << cc.producers
               << " producers of " << cc.part_bytes << " B";
          const auto want = tt::random_bytes(size_t(bytes), call_seed);
          const auto got = tt::download(out, size_t(bytes), ctx.stream());
          EXPECT_TRUE(tt::bytes_equal(want.data(), got.data(), size_t(bytes), what.str() + ", read after count_wait"));
          const uint64_t value = tt::download_n(counter, 1, ctx.stream())[0];
          EXPECT_EQ(value, (epoch_of(ctx, team) << 32) + cc.producers) << what.str() << ": counter after the call";
        }
  });
}

TILELINK_WORLD_SIZES(TilePrimitives);

}  // namespace
