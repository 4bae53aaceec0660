// src/runtime/load_store_window.hpp — which ranks a Team's table of mapped heaps covers (pure host
// logic, pinned by tests/cpu/load_store_window_test.cpp).
#pragma once

#include <algorithm>
#include <vector>

namespace tilelink {

// The first rank of the `width` consecutive ranks whose heaps go in rank `me`'s Team (ll::Team's
// heap_base): a window that holds `me` and, of those, the most ranks mapped here (`bases[r]`
// non-null); the lowest such start on a tie. 0 when the world fits. Ranks outside it are reached
// through NVSHMEM, so the choice only decides which peers load/store may still serve — on a node
// whose ranks are consecutive (MPI's default placement) the window is that node.
inline int load_store_window(const std::vector<char*>& bases, int me, int width) {
  const int n = int(bases.size());
  if (n <= width) return 0;
  int best = std::max(0, me - width + 1), best_count = -1;
  for (int first = std::max(0, me - width + 1); first <= std::min(me, n - width); ++first) {
    const int count = int(std::count_if(bases.begin() + first, bases.begin() + first + width,
                                        [](const char* b) { return b != nullptr; }));
    if (count > best_count) best = first, best_count = count;
  }
  return best;
}

}  // namespace tilelink
