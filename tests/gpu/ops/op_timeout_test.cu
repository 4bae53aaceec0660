// A fused op whose peer never delivers in time must end in an error naming the op, the rank, the
// wait site and the signal — not a hang, and not a dead process: the same world then runs 100
// correct calls. Here the "bug" is a straggler: in a 2-rank world, rank 1 sleeps far longer than
// rank 0's wait bound (300 ms) before making its call, so rank 0's GEMM (ag_gemm: waiting for
// rank 1's rows) or reduction kernel (gemm_rs: waiting for rank 1's partial sums) times out and
// aborts the call on both ranks. Both ops are forced onto their fused path: the automatic rule
// would pick NCCL or the copy engine when each rank has its own GPU, and the case must fail the
// same way on every layout (both ranks on one GPU, or one each).
//
// The other fault is a refusal: on a call shape every rank has made before (so no rank's checks
// need a collective and the others go ahead), one rank of three passes a null pointer. It must
// not leave the others waiting until their bound (60 s here): it keeps its epoch in step and
// aborts the call everywhere, the others' errors name it, and the world goes on.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gpu/common/gpu_test.hpp"
#include "tilelink/ops/ag_gemm/ag_gemm.hpp"
#include "tilelink/ops/gemm_rs/gemm_rs.hpp"
#include "tilelink/testing/check.hpp"

namespace tt = tilelink::test;
using tilelink::Context;
using tilelink::DType;

namespace {

struct Outcome {
  std::string error;        // the straggler call's error on this rank ("": none)
  tilelink::ll::WaitReport report{};
  int wrong_calls = 0;      // later calls whose C differs from the call before the fault
  std::string later_error;  // a later call's error ("": none)
  double seconds = 0;       // how long the faulty call took to fail on this rank
};

enum class Fault { straggler, refusal };

// A correct call on every rank (the reference C), the faulty call, then 100 correct calls, each
// compared bitwise with the reference.
std::vector<Outcome> faulty_call(bool gemm_rs, Fault fault) {
  tilelink::WorldOptions options;
  options.heap_bytes = 256u << 20;
  const int ranks = fault == Fault::straggler ? 2 : 3;
  tilelink::InProcessWorld world(ranks, options);
  std::vector<Outcome> out(ranks);
  const char* op = gemm_rs ? "gemm_rs" : "ag_gemm";
  const uint64_t seed = tt::fresh_seed();
  world.run([&](Context& ctx) {
    const int64_t m = 512 / ranks * ranks, n = 1024, k = 512;  // gemm_rs: m rows, m / ranks each
    const size_t c_bytes = size_t(gemm_rs ? m / ranks : ranks * m) * n * 2;
    void *a, *b, *c, *ref;
    TL_CUDA_CHECK(cudaMalloc(&a, m * k * 2));
    TL_CUDA_CHECK(cudaMalloc(&b, n * k * 2));
    TL_CUDA_CHECK(cudaMalloc(&c, c_bytes));
    TL_CUDA_CHECK(cudaMalloc(&ref, c_bytes));
    tt::fill_uniform(DType::bf16, a, m * k, tt::mix_seed(seed, ctx.rank(), 1), 1.0f, ctx.stream());
    tt::fill_uniform(DType::bf16, b, n * k, tt::mix_seed(seed, ctx.rank(), 2), 1.0f, ctx.stream());
    auto call = [&](const void* b_arg) {
      tt::poison_device(c, c_bytes, 0xff, ctx.stream());
      if (gemm_rs) {
        tilelink::GemmRsOptions o;
        o.path = tilelink::ReducePath::fused;
        tilelink::gemm_rs(ctx, {DType::bf16, a, b_arg, c, m, n, k}, o);
      } else {
        tilelink::AgGemmOptions o;
        o.path = tilelink::OpPath::fused;
        o.mode = tilelink::CommMode::push;
        o.engine = tilelink::CommEngine::sm;
        tilelink::ag_gemm(ctx, {DType::bf16, a, b_arg, c, m, n, k}, o);
      }
    };
    Outcome& mine = out[ctx.rank()];
    call(b);
    ctx.synchronize(op);
    TL_CUDA_CHECK(cudaMemcpyAsync(ref, c, c_bytes, cudaMemcpyDeviceToDevice, ctx.stream()));
    ctx.barrier();
    const bool straggling = fault == Fault::straggler;
    ctx.set_wait_timeout_ms(straggling && ctx.rank() == 0 ? 300 : 60000);
    if (straggling && ctx.rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(3));
    const auto t0 = std::chrono::steady_clock::now();
    try {
      call(!straggling && ctx.rank() == 1 ? nullptr : b);
      ctx.synchronize(op);
    } catch (const tilelink::Error& e) {
      mine.error = e.what();
    }
    mine.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    mine.report = *ctx.wait_report();
    ctx.barrier();
    ctx.set_wait_timeout_ms(5000);
    try {
      for (int i = 0; i < 100; ++i) {
        call(b);
        ctx.synchronize(op);
        const auto got = tt::download(c, c_bytes, ctx.stream());
        const auto want = tt::download(ref, c_bytes, ctx.stream());
        if (got != want) ++mine.wrong_calls;
      }
    } catch (const tilelink::Error& e) {
      mine.later_error = e.what();
    }
    for (void* p : {a, b, c, ref}) TL_CUDA_CHECK(cudaFree(p));
  });
  return out;
}

// `sites`: the waits that may legitimately time out first (the GEMM's wait for the straggler's
// rows, the copy's wait for the straggler's "ready", the reduction's wait for its partial sums).
void expect_error_then_usable(bool gemm_rs, const char* op, const std::vector<std::string>& sites) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<Outcome> out = faulty_call(gemm_rs, Fault::straggler);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(seconds, 60.0);
  const Outcome& waiter = out[0];
  SCOPED_TRACE("rank 0's error:\n" + waiter.error + "\nrank 1's error:\n" + out[1].error);
  EXPECT_EQ(waiter.report.failed, 1) << "rank 0's wait did not time out";
  EXPECT_EQ(waiter.report.rank, 0);
  bool named = false;
  for (const auto& site : sites) named |= std::string(waiter.report.site) == site;
  EXPECT_TRUE(named) << "rank 0 timed out in '" << waiter.report.site << "'";
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(out[r].error.find(std::string("op '") + op), std::string::npos) << "rank " << r;
    EXPECT_NE(out[r].error.find("timed out"), std::string::npos) << "rank " << r;
    EXPECT_NE(out[r].error.find("signal slot"), std::string::npos) << "rank " << r;
    EXPECT_EQ(out[r].later_error, "") << "rank " << r << ": a call after the fault failed";
    EXPECT_EQ(out[r].wrong_calls, 0) << "rank " << r << ": calls after the fault gave a wrong C";
  }
}

void expect_refusal_everywhere_then_usable(bool gemm_rs, const char* op) {
  const std::vector<Outcome> out = faulty_call(gemm_rs, Fault::refusal);
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r) + "'s error:\n" + out[r].error);
    if (r == 1) {
      EXPECT_NE(out[r].error.find("must be device pointers"), std::string::npos);
    } else {
      EXPECT_NE(out[r].error.find(std::string("op '") + op), std::string::npos);
      EXPECT_NE(out[r].error.find("rank 1 refused this call"), std::string::npos);
      EXPECT_LT(out[r].seconds, 10.0) << "the call ended at the wait bound (60 s), not at the refusal";
      EXPECT_EQ(out[r].report.failed, 0) << "a wait timed out";
    }
    EXPECT_EQ(out[r].later_error, "") << "a call after the refusal failed";
    EXPECT_EQ(out[r].wrong_calls, 0) << "calls after the refusal gave a wrong C";
  }
}

TEST(OpRefusal, AgGemmRefusedByOneRankEndsEverywhereAtOnceThenWorks) {
  expect_refusal_everywhere_then_usable(false, "ag_gemm");
}
TEST(OpRefusal, GemmRsRefusedByOneRankEndsEverywhereAtOnceThenWorks) {
  expect_refusal_everywhere_then_usable(true, "gemm_rs");
}

TEST(OpTimeout, AgGemmWaitingForAStragglerFailsWithItsSignalThenWorks) {
  expect_error_then_usable(false, "ag_gemm", {"consumer_tile_wait", "rank_wait"});
}
TEST(OpTimeout, GemmRsWaitingForAStragglerFailsWithItsSignalThenWorks) {
  expect_error_then_usable(true, "gemm_rs", {"rank_wait", "peer_tile_wait", "consumer_tile_wait"});
}

}  // namespace
