// tests/gpu/common/mpi_main.cpp — see run_tests_in_mpi_world and shared_fresh_seed in gpu_test.hpp.
#include <cstdio>
#include <exception>
#include <vector>

#include "gpu/common/gpu_test.hpp"

namespace tilelink::test {

int run_tests_in_mpi_world(int argc, char** argv, const char* name, Context** ctx) {
  ::testing::InitGoogleTest(&argc, argv);
  int rc = 1;
  try {
    MpiWorld world(&argc, &argv);
    *ctx = &world.context();
    std::printf("tilelink MpiWorld: rank %d of %d on GPU %d (%d rank(s) on this GPU), transport %s\n",
                (*ctx)->rank(), (*ctx)->num_ranks(), (*ctx)->device(), (*ctx)->ranks_on_device(),
                (*ctx)->transport_name());
    rc = RUN_ALL_TESTS();
    (*ctx)->barrier();
    *ctx = nullptr;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    rc = 2;
  }
  return rc;
}

uint64_t shared_fresh_seed(Context& ctx) {
  const uint64_t mine = fresh_seed();
  std::vector<uint64_t> all(ctx.num_ranks());
  ctx.allgather(&mine, all.data(), sizeof mine);
  return all[0];
}

}  // namespace tilelink::test
