// A fused op whose peer never delivers must end in an error naming the op, the rank, the wait
// site and the signal — not a hang. Here the "bug" is a straggler: in a 2-rank world, rank 1
// sleeps far longer than the wait timeout (TILELINK_WAIT_TIMEOUT_MS=300) before making its call,
// so rank 0's GEMM (ag_gemm: waiting for rank 1's rows) or reduction kernel (gemm_rs: waiting
// for rank 1's partial sums) times out. Both ops are forced onto their fused path: the automatic
// rule would pick NCCL when each rank has its own GPU, and the case must fail the same way on
// every layout (both ranks on one GPU, or one each). The timeout traps and kills the CUDA
// context, so each case runs in a child process; the parent checks the child's report and error
// text.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
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

constexpr const char* kChildFlag = "TILELINK_OP_TIMEOUT_CHILD";

// One call of the op on both ranks (so the shape is checked and buffers exist), then a second
// call that rank 1 makes only after 3 s.
void straggler(bool gemm_rs) {
  tilelink::WorldOptions options;
  options.heap_bytes = 256u << 20;
  auto* world = new tilelink::InProcessWorld(2, options);  // never destroyed: the context dies
  const char* op = gemm_rs ? "gemm_rs" : "ag_gemm";
  std::string error;
  try {
    world->run([&](Context& ctx) {
      const int64_t m = 512, n = 1024, k = 512;
      void *a, *b, *c;
      TL_CUDA_CHECK(cudaMalloc(&a, m * k * 2));
      TL_CUDA_CHECK(cudaMalloc(&b, n * k * 2));
      TL_CUDA_CHECK(cudaMalloc(&c, 2 * m * n * 2));
      tt::fill_uniform(DType::bf16, a, m * k, 1 + ctx.rank(), 1.0f, ctx.stream());
      tt::fill_uniform(DType::bf16, b, n * k, 5 + ctx.rank(), 1.0f, ctx.stream());
      auto call = [&] {
        if (gemm_rs) {
          tilelink::GemmRsOptions o;
          o.path = tilelink::ReducePath::fused;
          tilelink::gemm_rs(ctx, {DType::bf16, a, b, c, m, n, k}, o);
        } else {
          tilelink::AgGemmOptions o;
          o.path = tilelink::OpPath::fused;
          o.mode = tilelink::CommMode::push;
          o.engine = tilelink::CommEngine::sm;
          tilelink::ag_gemm(ctx, {DType::bf16, a, b, c, m, n, k}, o);
        }
      };
      call();
      ctx.synchronize(op);
      ctx.barrier();
      if (ctx.rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(3));
      call();
      ctx.synchronize(op);
    });
  } catch (const tilelink::Error& e) {
    error = e.what();
  }
  const volatile tilelink::ll::WaitReport* r = world->context(0).wait_report();
  char site[sizeof(r->site) + 1] = {};
  for (size_t i = 0; i < sizeof(r->site); ++i) site[i] = r->site[i];
  std::printf("CHILD_REPORT failed=%d rank=%d site=%s tile=%lld slot=%lld peer=%d\n", int(r->failed), int(r->rank),
              site, (long long)r->tile, (long long)r->slot, int(r->peer));
  std::printf("CHILD_ERROR_BEGIN\n%s\nCHILD_ERROR_END\n", error.empty() ? "(none)" : error.c_str());
  std::fflush(stdout);
  std::_Exit(error.empty() ? 0 : 3);
}

TEST(OpTimeoutChild, AgGemmStraggler) {
  if (!tt::env_flag(kChildFlag)) GTEST_SKIP() << "runs only as a child of OpTimeout";
  straggler(false);
}
TEST(OpTimeoutChild, GemmRsStraggler) {
  if (!tt::env_flag(kChildFlag)) GTEST_SKIP() << "runs only as a child of OpTimeout";
  straggler(true);
}

// `sites`: the waits that may legitimately time out first (the GEMM's wait for the straggler's
// rows, or the copy engine's wait for the straggler's "ready").
void expect_bounded_error(const char* child, const char* op, std::vector<std::string> sites) {
  const auto res = tt::run_self_as_child(std::string("OpTimeoutChild.") + child,
                                         {{kChildFlag, "1"}, {"TILELINK_WAIT_TIMEOUT_MS", "300"}}, 60.0);
  ASSERT_TRUE(res.started) << res.output;
  EXPECT_FALSE(res.timed_out) << "the op hung instead of failing:\n" << res.output;
  EXPECT_EQ(res.exit_code, 3) << res.output;
  EXPECT_LT(res.seconds, 30.0) << res.output;
  bool named = false;
  for (const auto& site : sites) named |= res.output.find("CHILD_REPORT failed=1 rank=0 site=" + site) != std::string::npos;
  EXPECT_TRUE(named) << res.output;
  EXPECT_NE(res.output.find(std::string("op '") + op), std::string::npos) << res.output;
  EXPECT_NE(res.output.find("timed out"), std::string::npos) << res.output;
  EXPECT_NE(res.output.find("signal slot"), std::string::npos) << res.output;
}

TEST(OpTimeout, AgGemmWaitingForAStragglerFailsWithItsSignal) {
  expect_bounded_error("AgGemmStraggler", "ag_gemm", {"consumer_tile_wait", "rank_wait"});
}
TEST(OpTimeout, GemmRsWaitingForAStragglerFailsWithItsSignal) {
  expect_bounded_error("GemmRsStraggler", "gemm_rs", {"rank_wait", "peer_tile_wait"});
}

}  // namespace
