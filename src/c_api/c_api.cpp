// src/c_api/c_api.cpp — tilelink/c_api.h: C++ worlds and ops behind a C ABI. Exceptions stop
// here and become TL_ERROR plus a per-thread message.
#include "tilelink/c_api.h"

#include <exception>
#include <cstdio>
#include <map>
#include <mutex>
#include <utility>
#include <memory>
#include <new>
#include <string>

#include "tilelink/ops/ag_gemm/ag_gemm.hpp"
#include "tilelink/ops/allgather_ll/allgather_ll.hpp"
#include "tilelink/ops/flash_decode/flash_decode.hpp"
#include "tilelink/ops/moe/ag_moe.hpp"
#include "tilelink/ops/moe/moe_rs.hpp"
#include "tilelink/gemm/gemm.hpp"
#include "tilelink/gemm/grouped.hpp"
#include "tilelink/gemm/tuning.hpp"
#include "tilelink/attention/attention.hpp"
#include "tilelink/ops/sp_attention/sp_attention.hpp"
#include "tilelink/ops/gemm_ar/gemm_ar.hpp"
#include "tilelink/ops/gemm_rs/gemm_rs.hpp"
#include "tilelink/core/error.hpp"
#include "tilelink/runtime/world.hpp"

namespace {

thread_local std::string last_error;

// The caller's allgather and barrier, behind tilelink's Bootstrap.
class CallbackBootstrap final : public tilelink::Bootstrap {
 public:
  CallbackBootstrap(int rank, int size, tl_allgather_fn allgather, tl_barrier_fn barrier, void* state)
      : rank_(rank), size_(size), allgather_(allgather), barrier_(barrier), state_(state) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void allgather(const void* mine, void* all, size_t bytes) override {
    TL_REQUIRE(allgather_(state_, mine, all, bytes) == 0, "tilelink rank ", rank_,
               ": the caller's bootstrap allgather failed (", bytes, " bytes per rank)");
  }
  void barrier() override {
    TL_REQUIRE(barrier_(state_) == 0, "tilelink rank ", rank_, ": the caller's bootstrap barrier failed");
  }

 private:
  int rank_, size_;
  tl_allgather_fn allgather_;
  tl_barrier_fn barrier_;
  void* state_;
};

template <class Body>
int guarded(Body&& body) {
  try {
    body();
    return TL_OK;
  } catch (const std::bad_alloc&) {
    last_error = "tilelink: out of host memory";
  } catch (const std::exception& e) {
    last_error = e.what();
  } catch (...) {
    last_error = "tilelink: unknown error";
  }
  return TL_ERROR;
}

tilelink::DType dtype_of(int dtype) {
  TL_REQUIRE(dtype == TL_BF16 || dtype == TL_FP16, "tilelink: dtype ", dtype, " is neither TL_BF16 nor TL_FP16");
  return dtype == TL_BF16 ? tilelink::DType::bf16 : tilelink::DType::fp16;
}

tilelink::OpPath path_of(int path) {
  TL_REQUIRE(path == TL_PATH_AUTO || path == TL_PATH_FUSED || path == TL_PATH_DECOMPOSED, "tilelink: path ", path,
             " is not TL_PATH_AUTO, TL_PATH_FUSED or TL_PATH_DECOMPOSED");
  return static_cast<tilelink::OpPath>(path);
}

// An op's options from the C call's path code and stream.
template <class Options>
Options op_options(int path, void* stream) {
  Options o;
  o.path = path_of(path);
  o.stream = static_cast<cudaStream_t>(stream);
  return o;
}

}  // namespace

struct tl_world {
  std::unique_ptr<CallbackBootstrap> bootstrap;
  std::unique_ptr<tilelink::ProcessWorld> world;
  tilelink::Context& ctx() { return world->context(); }
};

namespace {

// The grouped GEMM's argument workspace, one per device, grown on demand (cudaFree of the
// smaller one waits for the work that used it).
template <class Body>
void grouped_workspace(int device, size_t bytes, Body&& body) {
  static std::mutex mu;
  static std::map<int, std::pair<void*, size_t>> buffers;
  std::lock_guard<std::mutex> lock(mu);
  auto& [ptr, size] = buffers[device];
  if (size < bytes) {
    if (ptr) TL_CUDA_CHECK(cudaFree(ptr));
    ptr = nullptr;
    size = 0;
    TL_CUDA_CHECK(cudaMalloc(&ptr, bytes));
    size = bytes;
  }
  body(ptr, size);
}

tilelink::Context& context_of(tl_world* w) {
  TL_REQUIRE(w != nullptr && w->world != nullptr, "tilelink: the world is NULL or destroyed");
  return w->ctx();
}

}  // namespace

extern "C" {

int tl_api_version(void) { return TILELINK_C_API_VERSION; }

const char* tl_last_error(void) { return last_error.c_str(); }

int tl_world_create(int rank, int size, int device, tl_allgather_fn allgather, tl_barrier_fn barrier, void* state,
                    const tl_world_options* options, tl_world** out) {
  return guarded([&] {
    TL_REQUIRE(out != nullptr, "tl_world_create: out is NULL");
    TL_REQUIRE(allgather != nullptr && barrier != nullptr, "tl_world_create: the allgather and barrier are required");
    *out = nullptr;
    tilelink::WorldOptions opt;
    if (options != nullptr) {
      opt.heap_bytes = options->heap_bytes;
      opt.signal_slots = options->signal_slots;
      opt.wait_timeout_ms = options->wait_timeout_ms;
      TL_REQUIRE(options->transport >= TL_TRANSPORT_AUTO && options->transport <= TL_TRANSPORT_NVSHMEM,
                 "tl_world_create: transport ", options->transport, " is not a TL_TRANSPORT_* value");
      opt.transport = static_cast<tilelink::Transport>(options->transport);
    }
    auto w = std::make_unique<tl_world>();
    w->bootstrap = std::make_unique<CallbackBootstrap>(rank, size, allgather, barrier, state);
    w->world = std::make_unique<tilelink::ProcessWorld>(*w->bootstrap, device, opt);
    *out = w.release();
  });
}

int tl_world_destroy(tl_world* world) {
  return guarded([&] {
    if (world == nullptr) return;
    std::unique_ptr<tl_world> owned(world);
    owned->world.reset();  // collective: barriers through the caller's bootstrap
  });
}

int tl_world_query(tl_world* world, tl_world_info* info) {
  return guarded([&] {
    TL_REQUIRE(info != nullptr, "tl_world_query: info is NULL");
    tilelink::Context& ctx = context_of(world);
    *info = {ctx.rank(), ctx.num_ranks(), ctx.device(), ctx.sm_count(), ctx.max_ranks_per_gpu(),
             ctx.heap_layout().heap_bytes(), ctx.heap_free(), {}};
    std::snprintf(info->transport, sizeof info->transport, "%s", ctx.transport_name());
  });
}

int tl_world_check(tl_world* world, void* stream) {
  return guarded([&] {
    tilelink::Context& ctx = context_of(world);
    ctx.wait_stream(static_cast<cudaStream_t>(stream), ctx.current_op());
    ctx.check_faults(ctx.current_op());
  });
}

int tl_symmetric_alloc(tl_world* world, size_t bytes, void** out) {
  return guarded([&] {
    TL_REQUIRE(out != nullptr, "tl_symmetric_alloc: out is NULL");
    *out = context_of(world).symmetric_alloc(bytes, "tl_symmetric_alloc");
  });
}

int tl_peer_pointer(tl_world* world, void* local, int peer, void** out) {
  return guarded([&] {
    tilelink::Context& ctx = context_of(world);
    TL_REQUIRE(out != nullptr, "tl_peer_pointer: out is NULL");
    TL_REQUIRE(peer >= 0 && peer < ctx.num_ranks(), "tl_peer_pointer: peer ", peer, " is not a rank of this world");
    TL_REQUIRE(ctx.is_symmetric(local), "tl_peer_pointer: the pointer is not in this rank's symmetric heap");
    *out = ctx.peer_ptr(local, peer);
  });
}

int tl_ag_gemm(tl_world* world, int dtype, const void* a, const void* b, void* c, int64_t m_per_rank, int64_t n,
               int64_t k, void* a_gathered, int path, void* stream) {
  return guarded([&] {
    tilelink::ag_gemm(context_of(world), {dtype_of(dtype), a, b, c, m_per_rank, n, k, a_gathered},
                      op_options<tilelink::AgGemmOptions>(path, stream));
  });
}

int tl_gemm_rs(tl_world* world, int dtype, const void* a, const void* b, void* c, int64_t m, int64_t n, int64_t k,
               int path, void* stream) {
  return guarded([&] {
    tilelink::gemm_rs(context_of(world), {dtype_of(dtype), a, b, c, m, n, k},
                      op_options<tilelink::GemmRsOptions>(path, stream));
  });
}

int tl_gemm_ar(tl_world* world, int dtype, const void* a, const void* b, void* c, int64_t m, int64_t n, int64_t k,
               int path, void* stream) {
  return guarded([&] {
    tilelink::gemm_ar(context_of(world), {dtype_of(dtype), a, b, c, m, n, k},
                      op_options<tilelink::GemmArOptions>(path, stream));
  });
}

int tl_allgather_ll(tl_world* world, const void* in, void* out, int64_t bytes, void* stream) {
  return guarded([&] {
    tilelink::AllgatherLlOptions o;
    o.stream = static_cast<cudaStream_t>(stream);
    tilelink::allgather_ll(context_of(world), {in, out, bytes}, o);
  });
}

int tl_flash_decode(tl_world* world, int dtype, const void* q, const void* k, const void* v, void* out, int64_t batch,
                    int64_t q_heads, int64_t kv_heads, int64_t head_dim, int64_t kv_len, float scale, void* stream) {
  return guarded([&] {
    tilelink::FlashDecodeOptions o;
    o.stream = static_cast<cudaStream_t>(stream);
    tilelink::flash_decode(context_of(world),
                           {dtype_of(dtype), q, k, v, out, batch, q_heads, kv_heads, head_dim, kv_len, scale}, o);
  });
}

int tl_ag_moe(tl_world* world, int dtype, const void* x, const int32_t* topk_ids, const void* w, void* y,
              int64_t m_per_rank, int64_t hidden, int64_t n, int32_t num_experts, int32_t topk, int32_t* sorted_rows,
              int path, void* stream) {
  return guarded([&] {
    tilelink::AgMoeArgs a{dtype_of(dtype), x, topk_ids, w, y, m_per_rank, hidden, n, num_experts, topk};
    a.sorted_rows = sorted_rows;
    tilelink::ag_moe(context_of(world), a, op_options<tilelink::AgMoeOptions>(path, stream));
  });
}

int tl_moe_rs(tl_world* world, int dtype, const void* h, const int32_t* topk_ids, const float* topk_weights,
              const void* w, void* out, int64_t tokens, int64_t hidden, int64_t k_shard, int32_t num_experts,
              int32_t topk, const int32_t* h_rows, int path, void* stream) {
  return guarded([&] {
    tilelink::MoeRsArgs a{dtype_of(dtype), h, topk_ids, topk_weights, w, out, tokens, hidden, k_shard, num_experts, topk};
    a.h_rows = h_rows;
    tilelink::moe_rs(context_of(world), a, op_options<tilelink::MoeRsOptions>(path, stream));
  });
}

int tl_grouped_gemm(int dtype, const void* a, const void* b, void* d, int64_t n, int64_t k, int32_t num_groups,
                    const int32_t* group_end, int64_t max_rows, void* stream) {
  return guarded([&] {
    namespace g = tilelink::gemm;
    const g::GroupedGemmArgs args{dtype_of(dtype), a, b, d, n, k, num_groups, group_end, nullptr, num_groups, max_rows};
    const g::GroupedConfig cfg = g::choose_grouped_config(max_rows, num_groups, n, k);
    int device = 0;
    TL_CUDA_CHECK(cudaGetDevice(&device));
    grouped_workspace(device, g::grouped_gemm_workspace_bytes(cfg, num_groups, 0),
                      [&](void* ws, size_t bytes) { g::grouped_gemm(args, cfg, 0, ws, bytes, static_cast<cudaStream_t>(stream)); });
  });
}

int tl_gemm(int dtype, const void* a, const void* b, void* d, int64_t m, int64_t n, int64_t k, int64_t lda,
            int64_t ldb, int64_t ldd, void* stream) {
  return guarded([&] {
    const tilelink::gemm::GemmShape shape{m, n, k, lda, ldb, ldd};
    tilelink::gemm::gemm(dtype_of(dtype), a, b, d, shape, nullptr, 0, static_cast<cudaStream_t>(stream));
  });
}

int tl_gemm_set_tuning(int on) {
  return guarded([&] { tilelink::gemm::set_plain_gemm_tuning(on != 0); });
}

int tl_gemm_tuning(int* on) {
  return guarded([&] {
    TL_REQUIRE(on != nullptr, "tl_gemm_tuning: null output pointer");
    *on = tilelink::gemm::plain_gemm_tuning() ? 1 : 0;
  });
}

int tl_gemm_load_tuned_plans(const char* path, size_t* lines) {
  return guarded([&] {
    TL_REQUIRE(path != nullptr, "tl_gemm_load_tuned_plans: null path");
    const size_t n = tilelink::gemm::load_tuned_plans(path);
    if (lines) *lines = n;
  });
}

int tl_gemm_save_tuned_plans(const char* path, size_t* lines) {
  return guarded([&] {
    TL_REQUIRE(path != nullptr, "tl_gemm_save_tuned_plans: null path");
    const size_t n = tilelink::gemm::save_tuned_plans(path);
    if (lines) *lines = n;
  });
}

int tl_gemm_clear_tuned_plans(void) {
  return guarded([] { tilelink::gemm::clear_tuned_plans(); });
}

int tl_sp_attention(tl_world* world, int dtype, const void* q, const void* k, const void* v, void* out, float* lse,
                    int64_t batch, int64_t local_len, int64_t q_heads, int64_t kv_heads, int64_t head_dim, int causal,
                    int sharding, float scale, int path, void* stream) {
  return guarded([&] {
    tilelink::SpAttentionArgs a;
    a.dtype = dtype_of(dtype);
    a.q = q, a.k = k, a.v = v, a.out = out, a.lse = lse;
    a.batch = batch, a.local_len = local_len, a.q_heads = q_heads, a.kv_heads = kv_heads, a.head_dim = head_dim;
    a.causal = causal != 0;
    a.sharding = static_cast<tilelink::SequenceSharding>(sharding);
    a.scale = scale;
    tilelink::sp_attention(context_of(world), a, op_options<tilelink::SpAttentionOptions>(path, stream));
  });
}

int tl_attention_forward(int dtype, const void* q, const void* k, const void* v, void* out, float* lse, int64_t batch,
                         int64_t q_len, int64_t kv_len, int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                         const int64_t* strides, int causal, int64_t q_position0, float scale, void* stream) {
  return guarded([&] {
    tilelink::AttentionArgs a;
    a.dtype = dtype_of(dtype);
    a.q = q, a.k = k, a.v = v, a.out = out, a.lse = lse;
    a.batch = batch, a.q_len = q_len, a.kv_len = kv_len, a.q_heads = q_heads, a.kv_heads = kv_heads;
    a.head_dim = head_dim;
    if (strides != nullptr) {
      tilelink::AttentionStrides* each[4] = {&a.q_stride, &a.k_stride, &a.v_stride, &a.out_stride};
      for (int t = 0; t < 4; ++t) *each[t] = {strides[3 * t], strides[3 * t + 1], strides[3 * t + 2]};
    }
    a.causal = causal != 0;
    a.q_position0 = q_position0;
    a.scale = scale;
    tilelink::attention_forward(a, static_cast<cudaStream_t>(stream));
  });
}

}  // extern "C"
