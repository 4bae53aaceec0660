// src/ops/moe/routing.cu — the routing tables of routing.hpp, with CUB's scan and radix sort.
#include "ops/moe/routing.hpp"

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>

#include "tilelink/core/error.hpp"

namespace tilelink::ops {
namespace {

constexpr int kThreads = 256;

size_t align256(size_t x) { return (x + 255) / 256 * 256; }

// The carve-up of the workspace; the same on the host (sizes) and for the launch (pointers).
struct RoutingLayout {
  size_t group_end, group_weight, sorted_entry, entry_row, counts, keys_in, keys_out, values_in, scratch, total;
  size_t scratch_bytes;
};

size_t cub_scratch_bytes(const MoeRoutingShape& s) {
  size_t scan = 0, sort = 0;
  const int n = int(s.entries());
  TL_CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, scan, static_cast<const int32_t*>(nullptr),
                                              static_cast<int32_t*>(nullptr), s.groups()));
  TL_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort, static_cast<const int32_t*>(nullptr),
                                                static_cast<int32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                                static_cast<int32_t*>(nullptr), n, 0,
                                                moe_routing_key_bits(s.groups())));
  return std::max(scan, sort);
}

RoutingLayout layout_of(const MoeRoutingShape& s) {
  const size_t g = size_t(s.groups()), n = size_t(s.entries());
  RoutingLayout l{};
  size_t off = 0;
  auto take = [&](size_t bytes) {
    const size_t at = off;
    off += align256(bytes);
    return at;
  };
  l.group_end = take(g * 4);
  l.group_weight = take(g * 4);
  l.sorted_entry = take(n * 4);
  l.entry_row = take(n * 4);
  l.counts = take((g + 1) * 4);
  l.keys_in = take(n * 4);
  l.keys_out = take(n * 4);
  l.values_in = take(n * 4);
  l.scratch_bytes = cub_scratch_bytes(s);
  l.scratch = take(l.scratch_bytes);
  l.total = off;
  return l;
}

__global__ void routing_keys_kernel(const int32_t* __restrict__ topk_ids, MoeRoutingShape s, int32_t* keys,
                                    int32_t* values, int32_t* counts, int32_t* bad_ids) {
  const int64_t n = s.entries();
  const int32_t invalid = s.groups();
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t token = i / s.topk;
    const int32_t expert = topk_ids[i];
    int32_t key = invalid;
    if (expert >= 0 && expert < s.experts) {
      const int32_t source = int32_t(token / s.tokens_per_rank);
      const int32_t chunk = (source - s.first_rank + s.world) % s.world;
      key = chunk * s.experts + expert;
    } else {
      atomicAdd(bad_ids, 1);
    }
    keys[i] = key;
    values[i] = int32_t(i);
    atomicAdd(&counts[key], 1);
  }
}

__global__ void routing_inverse_kernel(MoeRoutingShape s, const int32_t* __restrict__ sorted_entry,
                                       const int32_t* __restrict__ group_end, int32_t* entry_row,
                                       int32_t* group_weight) {
  const int64_t n = s.entries();
  const int32_t valid = group_end[s.groups() - 1];
  const int64_t count = n > s.groups() ? n : s.groups();
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < count; p += int64_t(gridDim.x) * blockDim.x) {
    if (p < n) entry_row[sorted_entry[p]] = p < valid ? int32_t(p) : -1;
    if (p < s.groups()) group_weight[p] = int32_t(p % s.experts);
  }
}

}  // namespace

MoeRoutingErrors::MoeRoutingErrors() {
  void* host = nullptr;
  TL_CUDA_CHECK(cudaHostAlloc(&host, sizeof(int32_t), cudaHostAllocMapped));
  host_ = static_cast<volatile int32_t*>(host);
  *host_ = 0;
  TL_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_), host, 0));
}

MoeRoutingErrors::~MoeRoutingErrors() { cudaFreeHost(const_cast<int32_t*>(host_)); }

void MoeRoutingErrors::raise_new(const char* op, const char* effect) {
  const int32_t seen = *host_;
  if (seen == reported_) return;
  const int32_t fresh = seen - reported_;
  reported_ = seen;
  detail::fail(op, ": an earlier call's topk_ids held ", fresh, " expert id(s) outside [0, num_experts); ", effect);
}

int moe_routing_key_bits(int32_t groups) {
  int bits = 1;
  while ((int64_t(1) << bits) <= groups) ++bits;  // keys 0..groups (groups = "invalid")
  return bits;
}

size_t moe_routing_workspace_bytes(const MoeRoutingShape& shape) { return layout_of(shape).total; }

MoeRoutingTables enqueue_moe_routing(const MoeRoutingShape& s, const int32_t* topk_ids, void* workspace,
                                     size_t workspace_bytes, int32_t* bad_ids, cudaStream_t stream,
                                     int32_t* entry_row) {
  TL_REQUIRE(s.entries() > 0 && s.entries() <= INT32_MAX && s.groups() > 0 && s.tokens_per_rank > 0,
             "moe routing: bad shape (tokens ", s.tokens, ", topk ", s.topk, ", groups ", s.groups(), ")");
  const RoutingLayout l = layout_of(s);
  TL_REQUIRE(workspace_bytes >= l.total, "moe routing: workspace of ", workspace_bytes, " bytes, needs ", l.total);
  char* ws = static_cast<char*>(workspace);
  auto at = [&](size_t off) { return reinterpret_cast<int32_t*>(ws + off); };
  MoeRoutingTables t{at(l.group_end), at(l.group_weight), at(l.sorted_entry),
                     entry_row != nullptr ? entry_row : at(l.entry_row)};
  int32_t* counts = at(l.counts);
  int32_t* keys_in = at(l.keys_in);
  int32_t* keys_out = at(l.keys_out);
  int32_t* values_in = at(l.values_in);
  const int n = int(s.entries());
  const int blocks = std::min((n + kThreads - 1) / kThreads, 1024);

  TL_CUDA_CHECK(cudaMemsetAsync(counts, 0, size_t(s.groups() + 1) * 4, stream));
  routing_keys_kernel<<<blocks, kThreads, 0, stream>>>(topk_ids, s, keys_in, values_in, counts, bad_ids);
  TL_CUDA_CHECK(cudaGetLastError());
  size_t scratch = l.scratch_bytes;
  TL_CUDA_CHECK(cub::DeviceScan::InclusiveSum(ws + l.scratch, scratch, counts, t.group_end, s.groups(), stream));
  scratch = l.scratch_bytes;
  TL_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(ws + l.scratch, scratch, keys_in, keys_out, values_in, t.sorted_entry,
                                                n, 0, moe_routing_key_bits(s.groups()), stream));
  routing_inverse_kernel<<<std::max(blocks, (s.groups() + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      s, t.sorted_entry, t.group_end, t.entry_row, t.group_weight);
  TL_CUDA_CHECK(cudaGetLastError());
  return t;
}

}  // namespace tilelink::ops
