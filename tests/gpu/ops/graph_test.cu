// Op calls captured in a CUDA graph, on in-process worlds of 1 to 8 ranks on the visible GPUs.
// Every rank captures the same sequence of calls — ag_gemm (SM push, SM pull, automatic; captured
// calls always gather on SMs, and the automatic path on ranks sharing a GPU gathers on the copy
// engines when not captured),
// gemm_rs (ring pull, full-mesh push), gemm_ar (two-shot, automatic), allgather_ll, flash_decode,
// sp_attention, ag_moe, moe_rs — into one graph, then
// replays it 100 times, each time on fresh inputs (one of several random sets, copied into the
// captured input buffers) with the outputs poisoned with NaN first. Every replay's every output
// must equal, bitwise, the same call made without a graph on the same inputs. Calls made without
// a graph between the replays must stay right too (host and device epochs interleave), and a call
// that would need the other ranks' agreement (a shape never seen before) is refused inside a
// capture with an error that says what to do.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gpu/common/gpu_test.hpp"
#include "gpu/ops/op_cases.hpp"
#include "tilelink/ops/sp_attention/sp_attention.hpp"

namespace tt = tilelink::test;
using tilelink::Context;
using tilelink::DType;

namespace {

constexpr int kInputSets = 3;
constexpr int kReplays = 100;

// One call of the captured sequence: its input A (copied in before each replay), its own B, its
// output, and what the output must be for each input set.
struct Call {
  std::string name;
  int64_t a_elems = 0, b_elems = 0, c_elems = 0;
  std::function<void(Context&, const void* a, const void* b, void* c, cudaStream_t)> run;
  // Optional: fills the parts of b that are not random 16-bit values (a routing), once.
  std::function<void(void* b, cudaStream_t)> setup;
  void* a = nullptr;
  void* b = nullptr;
  void* c = nullptr;
  std::vector<void*> inputs;                     // kInputSets candidate A's
  std::vector<std::vector<uint8_t>> expected;    // C per input set (uncaptured call)
};

std::vector<Call> make_calls(int w) {
  using namespace tilelink;
  std::vector<Call> calls;
  auto ag = [&](const char* name, CommMode mode, CommEngine engine, OpPath path) {
    const int64_t m_per_rank = 72, n = 384, k = 256;
    Call c;
    c.name = name;
    c.a_elems = m_per_rank * k;
    c.b_elems = n * k;
    c.c_elems = m_per_rank * w * n;
    c.run = [=](Context& ctx, const void* a, const void* b, void* out, cudaStream_t s) {
      AgGemmOptions o;
      o.mode = mode;
      o.engine = engine;
      o.path = path;
      o.stream = s;
      ag_gemm(ctx, {DType::bf16, a, b, out, m_per_rank, n, k}, o);
    };
    calls.push_back(std::move(c));
  };
  auto reduce = [&](const char* name, const tt::ReduceVariant& v, int64_t m) {
    const int64_t n = 256, k = 320;
    Call c;
    c.name = name;
    c.a_elems = m * k;
    c.b_elems = n * k;
    c.c_elems = (v.all_reduce ? m : m / w) * n;
    c.run = [=](Context& ctx, const void* a, const void* b, void* out, cudaStream_t s) {
      if (v.all_reduce) {
        GemmArOptions o;
        o.path = v.path;
        o.algo = v.ar_algo;
        o.stream = s;
        gemm_ar(ctx, {DType::bf16, a, b, out, m, n, k}, o);
      } else {
        GemmRsOptions o;
        o.path = v.path;
        o.algo = v.rs_algo;
        o.mode = v.mode;
        o.stream = s;
        gemm_rs(ctx, {DType::bf16, a, b, out, m, n, k}, o);
      }
    };
    calls.push_back(std::move(c));
  };
  ag("ag_gemm push/sm/fused", CommMode::push, CommEngine::sm, OpPath::fused);
  reduce("gemm_rs ring/pull/fused", {false, RsAlgo::ring, CommMode::pull, ArAlgo::automatic, OpPath::fused}, 64 * w);
  ag("ag_gemm pull/sm/fused", CommMode::pull, CommEngine::sm, OpPath::fused);
  reduce("gemm_ar two_shot/fused", {true, RsAlgo::ring, CommMode::pull, ArAlgo::two_shot, OpPath::fused}, 129);
  reduce("gemm_rs full_mesh/push/fused", {false, RsAlgo::full_mesh, CommMode::push, ArAlgo::automatic, OpPath::fused},
         32 * w);
  ag("ag_gemm auto", CommMode::push, CommEngine::sm, OpPath::automatic);
  {
    Call c;
    c.name = "allgather_ll";
    c.a_elems = 3004;  // 6008 bytes per rank
    c.b_elems = 8;     // unused
    c.c_elems = c.a_elems * w;
    c.run = [bytes = c.a_elems * 2](Context& ctx, const void* a, const void*, void* out, cudaStream_t s) {
      AllgatherLlOptions o;
      o.stream = s;
      allgather_ll(ctx, {a, out, bytes}, o);
    };
    calls.push_back(std::move(c));
  }
  {
    // q is the varying input; b holds this rank's K then V (uneven shards: 300 + 37 r tokens).
    constexpr int64_t kBatch = 2, kHeads = 8, kKvHeads = 2, kDim = 64, kMaxLen = 300 + 37 * 7;
    constexpr int64_t kKv = kBatch * kMaxLen * kKvHeads * kDim;
    Call c;
    c.name = "flash_decode";
    c.a_elems = kBatch * kHeads * kDim;
    c.b_elems = 2 * kKv;
    c.c_elems = c.a_elems;
    c.run = [](Context& ctx, const void* a, const void* b, void* out, cudaStream_t s) {
      FlashDecodeOptions o;
      o.stream = s;
      const auto* kv = static_cast<const char*>(b);
      flash_decode(ctx, {DType::bf16, a, kv, kv + kKv * 2, out, kBatch, kHeads, kKvHeads, kDim, 300 + 37 * ctx.rank()},
                   o);
    };
    calls.push_back(std::move(c));
  }
  reduce("gemm_ar auto", {true, RsAlgo::ring, CommMode::pull, ArAlgo::automatic, OpPath::automatic}, 96);
  {
    // q is the varying input; b holds this rank's K then V (zig-zag shards, causal).
    constexpr int64_t kLocal = 64, kHeads = 4, kKvHeads = 2, kDim = 64, kKv = kLocal * kKvHeads * kDim;
    Call c;
    c.name = "sp_attention";
    c.a_elems = kLocal * kHeads * kDim;
    c.b_elems = 2 * kKv;
    c.c_elems = c.a_elems;
    c.run = [](Context& ctx, const void* a, const void* b, void* out, cudaStream_t s) {
      SpAttentionOptions o;
      o.stream = s;
      const auto* kv = static_cast<const char*>(b);
      SpAttentionArgs args;
      args.q = a, args.k = kv, args.v = kv + kKv * 2, args.out = out;
      args.batch = 1, args.local_len = kLocal, args.q_heads = kHeads, args.kv_heads = kKvHeads, args.head_dim = kDim;
      args.causal = true;
      sp_attention(ctx, args, o);
    };
    calls.push_back(std::move(c));
  }
  // The MoE ops: b holds the weights, then the routing (the same on every rank), which setup writes.
  constexpr int32_t kExperts = 8, kTopk = 2;
  constexpr int64_t kTokensPerRank = 24, kHidden = 128, kInter = 64;
  const int64_t tokens = kTokensPerRank * w, entries = tokens * kTopk;
  const int64_t w_elems = kExperts * kInter * kHidden;
  auto write_routing = [=](void* b, cudaStream_t s) {
    std::vector<int32_t> ids(static_cast<size_t>(entries));
    std::vector<float> weights(static_cast<size_t>(entries));
    for (int64_t i = 0; i < entries; ++i) {
      ids[size_t(i)] = int32_t((i / kTopk * 5 + (i % kTopk) * 3 + (i * i) % 7) % kExperts);
      if (i % kTopk == 1 && ids[size_t(i)] == ids[size_t(i - 1)]) ids[size_t(i)] = (ids[size_t(i)] + 1) % kExperts;
      weights[size_t(i)] = 0.25f + 0.5f * float(i % 3);
    }
    char* tail = static_cast<char*>(b) + w_elems * 2;
    TL_CUDA_CHECK(cudaMemcpyAsync(tail, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice, s));
    TL_CUDA_CHECK(cudaMemcpyAsync(tail + ids.size() * 4, weights.data(), weights.size() * 4, cudaMemcpyHostToDevice, s));
    TL_CUDA_CHECK(cudaStreamSynchronize(s));
  };
  {
    Call c;
    c.name = "ag_moe";
    c.a_elems = kTokensPerRank * kHidden;
    c.b_elems = w_elems + 4 * entries;  // weights [experts, inter, hidden], ids, (unused) weights
    c.c_elems = entries * kInter;
    c.setup = write_routing;
    c.run = [=](Context& ctx, const void* a, const void* b, void* out, cudaStream_t s) {
      AgMoeOptions o;
      o.stream = s;
      const auto* ids = reinterpret_cast<const int32_t*>(static_cast<const char*>(b) + w_elems * 2);
      ag_moe(ctx, {DType::bf16, a, ids, b, out, kTokensPerRank, kHidden, kInter, kExperts, kTopk}, o);
    };
    calls.push_back(std::move(c));
  }
  {
    Call c;
    c.name = "moe_rs";
    c.a_elems = entries * kHidden;       // h [tokens * topk, k_shard = hidden here]
    c.b_elems = w_elems + 4 * entries;   // down projection [experts, inter, hidden], ids, weights
    c.c_elems = kTokensPerRank * kInter;
    c.setup = write_routing;
    c.run = [=](Context& ctx, const void* a, const void* b, void* out, cudaStream_t s) {
      MoeRsOptions o;
      o.stream = s;
      const char* tail = static_cast<const char*>(b) + w_elems * 2;
      moe_rs(ctx, {DType::bf16, a, reinterpret_cast<const int32_t*>(tail), reinterpret_cast<const float*>(tail + entries * 4),
                   b, out, tokens, kInter, kHidden, kExperts, kTopk},
             o);
    };
    calls.push_back(std::move(c));
  }
  return calls;
}

void run_sequence(Context& ctx, std::vector<Call>& calls, cudaStream_t s) {
  for (Call& c : calls) c.run(ctx, c.a, c.b, c.c, s);
}

// The captured A's get input set `set`; the outputs get NaN.
void stage_inputs(std::vector<Call>& calls, int set, cudaStream_t s) {
  for (Call& c : calls) {
    TL_CUDA_CHECK(cudaMemcpyAsync(c.a, c.inputs[size_t(set)], size_t(c.a_elems) * 2, cudaMemcpyDeviceToDevice, s));
    tt::poison_nan(DType::bf16, c.c, c.c_elems, s);
  }
}

class OpGraph : public tt::WorldSizeTest {};

TEST_P(OpGraph, CapturedCallsReplayLikeUncapturedCalls) {
  const uint64_t seed = tt::fresh_seed();
  SCOPED_TRACE(tt::seed_trace(seed));
  const int w = ranks();
  world().run([&](Context& ctx) {
    const int r = ctx.rank();
    const std::string rank = ", rank " + std::to_string(r) + ", " + tt::seed_trace(seed);
    cudaStream_t own = ctx.stream(), capture_stream = nullptr;
    TL_CUDA_CHECK(cudaStreamCreateWithFlags(&capture_stream, cudaStreamNonBlocking));
    std::vector<Call> calls = make_calls(w);
    for (size_t i = 0; i < calls.size(); ++i) {
      Call& c = calls[i];
      TL_CUDA_CHECK(cudaMalloc(&c.a, size_t(c.a_elems) * 2));
      TL_CUDA_CHECK(cudaMalloc(&c.b, size_t(c.b_elems) * 2));
      TL_CUDA_CHECK(cudaMalloc(&c.c, size_t(c.c_elems) * 2));
      tt::fill_uniform(DType::bf16, c.b, c.b_elems, tt::mix_seed(seed, r, i, 1000), 1.0f, own);
      if (c.setup) c.setup(c.b, own);
      for (int set = 0; set < kInputSets; ++set) {
        void* in = nullptr;
        TL_CUDA_CHECK(cudaMalloc(&in, size_t(c.a_elems) * 2));
        tt::fill_uniform(DType::bf16, in, c.a_elems, tt::mix_seed(seed, r, i, set), 1.0f, own);
        c.inputs.push_back(in);
      }
    }
    // Without a graph: the expected outputs (these first calls also agree on every shape across
    // the ranks and size the workspaces, which a capture cannot do).
    for (int set = 0; set < kInputSets; ++set) {
      stage_inputs(calls, set, own);
      run_sequence(ctx, calls, own);
      ctx.synchronize("the sequence without a graph");
      for (Call& c : calls) c.expected.push_back(tt::download(c.c, size_t(c.c_elems) * 2, own));
    }

    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    // Thread-local: the other ranks of this process keep making CUDA calls while this one captures.
    TL_CUDA_CHECK(cudaStreamBeginCapture(capture_stream, cudaStreamCaptureModeThreadLocal));
    run_sequence(ctx, calls, capture_stream);
    TL_CUDA_CHECK(cudaStreamEndCapture(capture_stream, &graph));
    TL_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    // A graph's first launch sets it up on the device, which may wait for the device: ranks of
    // this process sharing a GPU must not have kernels waiting for this rank meanwhile (they
    // would wait forever). Upload it on every rank first, then replay.
    TL_CUDA_CHECK(cudaGraphUpload(exec, capture_stream));
    TL_CUDA_CHECK(cudaStreamSynchronize(capture_stream));
    ctx.barrier();

    // Replays on fresh input sets, in the same order on every rank (the calls are collective).
    std::mt19937_64 rng(seed);
    for (int rep = 0; rep < kReplays; ++rep) {
      const int set = int(rng() % kInputSets);
      stage_inputs(calls, set, capture_stream);
      TL_CUDA_CHECK(cudaGraphLaunch(exec, capture_stream));
      // A failure names every rank's wait that timed out (Context::raise), and the replay.
      if (const cudaError_t err = cudaStreamSynchronize(capture_stream); err != cudaSuccess)
        ctx.raise(("graph replay " + std::to_string(rep)).c_str(), err);
      for (Call& c : calls) {
        const auto got = tt::download(c.c, size_t(c.c_elems) * 2, own);
        // EXPECT, not ASSERT: every rank keeps making the same calls, or its peers would wait.
        EXPECT_TRUE(tt::bytes_equal(c.expected[size_t(set)].data(), got.data(), got.size(),
                                    c.name + ", replay " + std::to_string(rep) + ", input set " + std::to_string(set) + rank));
      }
      if (rep % 25 == 24) {
        // The same calls without the graph, between replays.
        const int other = int(rng() % kInputSets);
        stage_inputs(calls, other, own);
        run_sequence(ctx, calls, own);
        ctx.synchronize("the sequence between replays");
        for (Call& c : calls) {
          const auto got = tt::download(c.c, size_t(c.c_elems) * 2, own);
          EXPECT_TRUE(tt::bytes_equal(c.expected[size_t(other)].data(), got.data(), got.size(),
                                      c.name + " without the graph, after replay " + std::to_string(rep) + rank));
        }
      }
    }
    ctx.barrier();  // peers may read this rank's buffers until every rank is done
    TL_CUDA_CHECK(cudaGraphExecDestroy(exec));
    TL_CUDA_CHECK(cudaGraphDestroy(graph));
    for (Call& c : calls) {
      for (void* p : c.inputs) cudaFree(p);
      for (void* p : {c.a, c.b, c.c}) cudaFree(p);
    }
    cudaStreamDestroy(capture_stream);
  });
}

// A shape never called before needs the ranks to agree on it (and its buffers sized): inside a
// capture that is refused, on every rank, before anything is enqueued, and the capture can still
// be ended.
TEST_P(OpGraph, FirstCallOfAShapeIsRefusedInsideACapture) {
  const int w = ranks();
  world().run([&](Context& ctx) {
    cudaStream_t s = nullptr;
    TL_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    void* buf = nullptr;
    const int64_t m_per_rank = 24, n = 8 * (40 + w), k = 136;  // a shape no other test calls
    TL_CUDA_CHECK(cudaMalloc(&buf, size_t(m_per_rank * w * std::max(n, k)) * 2));
    tilelink::AgGemmOptions o;
    o.stream = s;
    TL_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    std::string error;
    try {
      tilelink::ag_gemm(ctx, {DType::bf16, buf, buf, buf, m_per_rank, n, k}, o);
    } catch (const tilelink::Error& e) {
      error = e.what();
    }
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
    if (graph != nullptr) cudaGraphDestroy(graph);
    EXPECT_NE(error.find("captured into a CUDA graph"), std::string::npos) << "error: '" << error << "'";
    EXPECT_NE(error.find("before capturing"), std::string::npos) << error;
    ctx.barrier();
    cudaFree(buf);
    cudaStreamDestroy(s);
  });
}

TILELINK_WORLD_SIZES(OpGraph);

}  // namespace
