// The parts of the low-level primitives that can be checked without a GPU, run on the host
// (label cpu, so CI runs them): how SM copies split any size and alignment over threads, and the
// schedule of the TMA staged copy against a model of asynchronous bulk loads and stores.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <vector>

#include "tilelink/ll.cuh"

namespace {

namespace lld = tilelink::ll::detail;

// Threads are simulated one after another: their byte ranges are disjoint, so the order does not
// matter; the check is that together they write exactly the window, with the right bytes.
TEST(LlHostModel, CopySplitCoversEverySizeAndAlignment) {
  std::vector<size_t> sizes;
  for (size_t i = 0; i <= 200; ++i) sizes.push_back(i);
  for (size_t s : {size_t(4096 + 5), size_t(65536 + 3), size_t(100003)}) sizes.push_back(s);
  std::vector<unsigned char> src(110000 + 64), dst_store(110000 + 128);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  // 16-byte aligned bases, so the offsets cover every residue.
  unsigned char* s0 = src.data() + (16 - reinterpret_cast<uintptr_t>(src.data()) % 16) % 16;
  unsigned char* d0 = dst_store.data() + (16 - reinterpret_cast<uintptr_t>(dst_store.data()) % 16) % 16;
  size_t bad = 0;
  for (size_t n : sizes)
    for (int so = 0; so < 32; ++so)
      for (int doff = 0; doff < 32; ++doff)
        for (unsigned nthr : {1u, 32u, 96u}) {
          if (n > 300 && (so % 5 != 0 || doff % 7 != 0)) continue;
          const size_t region = 32 + 32 + n + 32;  // guard, offset, window, guard
          std::memset(d0, 0xEE, region);
          unsigned char* d = d0 + 32 + doff;
          for (unsigned t = 0; t < nthr; ++t) lld::copy_bytes(d, s0 + so, n, t, nthr);
          bool ok = std::memcmp(d, s0 + so, n) == 0;
          for (unsigned char* p = d0; p < d; ++p) ok &= *p == 0xEE;
          for (unsigned char* p = d + n; p < d0 + region; ++p) ok &= *p == 0xEE;
          if (!ok && bad++ < 5)
            ADD_FAILURE() << "copy_bytes: " << n << " bytes, src offset " << so << ", dst offset " << doff << ", "
                          << nthr << " threads";
        }
  EXPECT_EQ(bad, 0u);
}

// Loads land as late as possible (when waited for), stores read their stage as late as possible
// (when a wait_read forces it, or at the end). The model flags: a load into a stage whose store
// has not finished reading it or that still has a load in flight; a wait for a chunk that is not
// the one loading into that stage, or with the wrong parity; a store from a stage still loading.
struct ScheduleModel {
  const std::vector<unsigned char>& src;
  std::vector<unsigned char>& dst;
  uint32_t stages, chunk;
  std::vector<std::vector<unsigned char>> buf;
  std::vector<long> loading;
  std::vector<size_t> load_off, load_len;
  std::vector<uint32_t> phases;
  struct Store {
    uint32_t stage;
    size_t off;
    uint32_t len;
    bool read;
    std::vector<unsigned char> data;
  };
  std::deque<Store> stores;
  std::vector<std::string> errors;

  ScheduleModel(const std::vector<unsigned char>& s, std::vector<unsigned char>& d, uint32_t st, uint32_t ch)
      : src(s), dst(d), stages(st), chunk(ch), buf(st, std::vector<unsigned char>(ch)), loading(st, -1),
        load_off(st), load_len(st), phases(st, 0) {}
  void error(const std::string& what, size_t k) { errors.push_back(what + " (chunk " + std::to_string(k) + ")"); }
  void load(size_t k, uint32_t stage, size_t off, uint32_t len) {
    if (loading[stage] != -1) error("load into a stage with a load in flight", k);
    for (const auto& g : stores)
      if (g.stage == stage && !g.read) error("load into a stage a store is still reading", k);
    if (len == 0 || len % 16 != 0 || len > chunk) error("bad load length", k);
    loading[stage] = long(k);
    load_off[stage] = off;
    load_len[stage] = len;
  }
  void wait(size_t k, uint32_t stage, uint32_t parity) {
    if (loading[stage] != long(k)) return error("wait for a chunk that is not loading into its stage", k);
    if ((phases[stage] & 1u) != parity) error("wait parity is not the phase due", k);
    std::memcpy(buf[stage].data(), src.data() + load_off[stage], load_len[stage]);
    ++phases[stage];
    loading[stage] = -1;
  }
  void store(size_t k, uint32_t stage, size_t off, uint32_t len) {
    if (loading[stage] != -1) error("store from a stage still loading", k);
    stores.push_back({stage, off, len, false, {}});
  }
  void commit() {}
  void read(Store& g) {
    if (g.read) return;
    g.data.assign(buf[g.stage].begin(), buf[g.stage].begin() + g.len);
    g.read = true;
  }
  void wait_read(int newest_pending) {
    for (size_t i = 0; i + size_t(newest_pending) < stores.size(); ++i) read(stores[i]);
  }
  void finish() {
    for (auto& g : stores) {
      read(g);
      std::memcpy(dst.data() + g.off, g.data.data(), g.len);
    }
    for (uint32_t s = 0; s < stages; ++s)
      if (loading[s] != -1) error("load never waited for", 0);
  }
};

TEST(LlHostModel, TmaStagedCopySchedule) {
  for (uint32_t stages : {1u, 2u, 3u, 4u, 8u})
    for (uint32_t chunk : {16u, 32u, 48u, 1024u})
      for (size_t body = 16; body <= 16 * 80; body += 16) {
        std::vector<unsigned char> src(body), dst(body, 0);
        for (size_t i = 0; i < body; ++i) src[i] = static_cast<unsigned char>(i * 7 + body);
        ScheduleModel m(src, dst, stages, chunk);
        lld::tma_schedule(m, body, stages, chunk);
        m.finish();
        ASSERT_TRUE(m.errors.empty()) << stages << " stages, chunk " << chunk << ", " << body
                                      << " bytes: " << m.errors.front();
        ASSERT_TRUE(dst == src) << stages << " stages, chunk " << chunk << ", " << body << " bytes: data wrong";
      }
}

}  // namespace
