// tilelink/runtime/heap_layout.hpp — where things live inside one rank's symmetric heap.
//
// Pure bookkeeping (no CUDA): the Context owns the device memory, this class owns the offsets.
// Every rank runs the same sequence of allocations, so every rank computes the same offsets, which
// is what makes symm_at plain base arithmetic. The heap looks the same on every rank:
//
//   [0, signal_slots*8)                 signal pool: 64-bit counters, zeroed once at creation
//   [align(signal_slots*8), heap_bytes) data: carved by a bump allocator, kAlignment-aligned
//
// Nothing is ever freed. Ops allocate once and cache their buffers under a key (workspaces); a
// workspace that has to grow is extended in place when it is the newest block, re-carved
// otherwise. Signal slots are never handed out twice, so a fresh slot is always zero.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>

namespace tilelink {

class HeapLayout {
 public:
  static constexpr size_t kAlignment = 1024;  // every data block starts on a 1 KiB boundary
  static constexpr size_t kSlotBytes = 8;     // one signal is a uint64_t

  HeapLayout() = default;
  // Throws tilelink::Error if the signal pool does not leave room for data in the heap.
  HeapLayout(size_t heap_bytes, size_t signal_slots);

  size_t heap_bytes() const { return heap_bytes_; }
  size_t signal_slots() const { return signal_slots_; }
  size_t pool_bytes() const { return signal_slots_ * kSlotBytes; }
  size_t data_begin() const { return data_begin_; }  // offset of the first data block
  size_t used_bytes() const { return data_top_; }     // pool included
  size_t free_bytes() const { return heap_bytes_ - data_top_; }
  size_t used_slots() const { return signal_top_; }
  size_t free_slots() const { return signal_slots_ - signal_top_; }

  // Offset of a new data block of `bytes` bytes. Throws naming `what`, the request and the free
  // space when the heap is exhausted; the layout is unchanged then.
  size_t allocate(size_t bytes, const std::string& what);
  // Index of the first of `count` new signal slots (count >= 1).
  size_t allocate_signals(size_t count, const std::string& what);

  // Workspaces: the offset cached under `key` if it holds at least `bytes`, else nothing.
  std::optional<size_t> find_workspace(const std::string& key, size_t bytes) const;
  // (Re)carves the workspace `key` to hold `bytes`; returns its offset.
  size_t grow_workspace(const std::string& key, size_t bytes);
  std::optional<size_t> find_signal_workspace(const std::string& key, size_t count) const;
  size_t grow_signal_workspace(const std::string& key, size_t count);

  // Whether [offset, offset + bytes) lies inside the heap.
  bool contains(size_t offset, size_t bytes) const {
    return offset <= heap_bytes_ && bytes <= heap_bytes_ - offset;
  }

 private:
  struct Block {
    size_t begin = 0, size = 0;
  };
  size_t heap_bytes_ = 0, signal_slots_ = 0, data_begin_ = 0;
  size_t data_top_ = 0, last_data_ = 0;      // bump pointer, and where the newest block starts
  size_t signal_top_ = 0, last_signal_ = 0;  // the same for the signal pool
  std::map<std::string, Block> workspaces_, signal_workspaces_;
};

// "1.50 GiB (1610612736 bytes)": sizes in error messages, readable and exact.
std::string format_bytes(size_t bytes);

}  // namespace tilelink
