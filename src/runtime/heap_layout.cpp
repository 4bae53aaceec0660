// Bump allocation over the symmetric heap's offsets; see heap_layout.hpp for the layout.
#include "tilelink/runtime/heap_layout.hpp"

#include <cstdio>

#include "tilelink/core/error.hpp"

namespace tilelink {

namespace {
size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }
}  // namespace

std::string format_bytes(size_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) v /= 1024.0, ++u;
  char buf[64];
  if (u == 0) std::snprintf(buf, sizeof buf, "%zu bytes", bytes);
  else std::snprintf(buf, sizeof buf, "%.2f %s (%zu bytes)", v, units[u], bytes);
  return buf;
}

HeapLayout::HeapLayout(size_t heap_bytes, size_t signal_slots)
    : heap_bytes_(heap_bytes), signal_slots_(signal_slots) {
  TL_REQUIRE(signal_slots >= 1, "symmetric heap: the signal pool needs at least one slot");
  TL_REQUIRE(signal_slots <= heap_bytes / kSlotBytes, "symmetric heap: a pool of ", signal_slots,
             " signal slots does not fit in a heap of ", format_bytes(heap_bytes),
             "; raise TILELINK_HEAP_MB or lower the signal slots");
  data_begin_ = round_up(pool_bytes(), kAlignment);
  TL_REQUIRE(data_begin_ < heap_bytes, "symmetric heap: a heap of ", format_bytes(heap_bytes),
             " leaves no room for data after the signal pool of ", signal_slots,
             " slots; raise TILELINK_HEAP_MB");
  data_top_ = last_data_ = data_begin_;
}

size_t HeapLayout::allocate(size_t bytes, const std::string& what) {
  // A zero-byte request still gets a block of its own, so distinct requests never alias.
  const size_t need = bytes == 0 ? kAlignment : bytes;
  if (need > free_bytes())
    detail::fail("symmetric heap exhausted: '", what, "' requested ", format_bytes(bytes),
                 " but only ", format_bytes(free_bytes()), " of the ", format_bytes(heap_bytes_),
                 " heap are free; raise TILELINK_HEAP_MB (MiB per rank) or WorldOptions::heap_bytes");
  const size_t offset = data_top_;
  last_data_ = offset;
  // The last block may end unaligned at the heap's end; the next request then finds no room.
  data_top_ = std::min(heap_bytes_, offset + round_up(need, kAlignment));
  return offset;
}

size_t HeapLayout::allocate_signals(size_t count, const std::string& what) {
  TL_REQUIRE(count >= 1, "signal_alloc '", what, "': asked for 0 signal slots");
  if (count > free_slots())
    detail::fail("signal pool exhausted: '", what, "' requested ", count, " slots but only ",
                 free_slots(), " of ", signal_slots_,
                 " are free; raise TILELINK_SIGNAL_SLOTS or WorldOptions::signal_slots");
  const size_t index = signal_top_;
  last_signal_ = index;
  signal_top_ += count;
  return index;
}

std::optional<size_t> HeapLayout::find_workspace(const std::string& key, size_t bytes) const {
  auto it = workspaces_.find(key);
  if (it == workspaces_.end() || it->second.size < bytes) return std::nullopt;
  return it->second.begin;
}

size_t HeapLayout::grow_workspace(const std::string& key, size_t bytes) {
  auto it = workspaces_.find(key);
  const std::string what = "workspace '" + key + "'";
  if (it != workspaces_.end() && it->second.begin == last_data_ && data_top_ > last_data_) {
    // The newest block: extend it where it is, restoring the bump pointer if that fails.
    const size_t saved_top = data_top_;
    data_top_ = it->second.begin;
    try {
      allocate(bytes, what);
    } catch (...) {
      data_top_ = saved_top;
      throw;
    }
    it->second.size = bytes;
    return it->second.begin;
  }
  const size_t offset = allocate(bytes, what);
  workspaces_[key] = Block{offset, bytes};
  return offset;
}

std::optional<size_t> HeapLayout::find_signal_workspace(const std::string& key,
                                                        size_t count) const {
  auto it = signal_workspaces_.find(key);
  if (it == signal_workspaces_.end() || it->second.size < count) return std::nullopt;
  return it->second.begin;
}

size_t HeapLayout::grow_signal_workspace(const std::string& key, size_t count) {
  auto it = signal_workspaces_.find(key);
  const std::string what = "signal workspace '" + key + "'";
  if (it != signal_workspaces_.end() && it->second.begin == last_signal_ &&
      signal_top_ == it->second.begin + it->second.size) {
    // Extending in place hands out slots nobody had: still zero. The old ones keep the epochs
    // of past calls, which no later wait can mistake for its own.
    const size_t saved_top = signal_top_;
    signal_top_ = it->second.begin;
    try {
      allocate_signals(count, what);
    } catch (...) {
      signal_top_ = saved_top;
      throw;
    }
    it->second.size = count;
    return it->second.begin;
  }
  const size_t index = allocate_signals(count, what);
  signal_workspaces_[key] = Block{index, count};
  return index;
}

}  // namespace tilelink
