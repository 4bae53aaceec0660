// src/runtime/nccl_comm.cpp — see tilelink/runtime/nccl.hpp.
#include "tilelink/runtime/nccl.hpp"

#include <cstring>
#include <vector>

#include "tilelink/core/error.hpp"

namespace tilelink {
namespace {

struct NcclState {
  explicit NcclState(Context& ctx) {
    // Checked against the world, not this rank's GPU: with uneven sharing a rank alone on its GPU
    // would otherwise enter ncclCommInitRank while its peers never do.
    TL_REQUIRE(ctx.max_ranks_per_gpu() == 1, "NCCL needs one GPU per rank, but up to ", ctx.max_ranks_per_gpu(),
               " ranks of this world share a GPU (rank ", ctx.rank(), " is on GPU ", ctx.device(), ")");
    ncclUniqueId id{};
    if (ctx.rank() == 0) nccl_check(ncclGetUniqueId(&id), ctx, "ncclGetUniqueId");
    std::vector<char> all(sizeof(id) * ctx.num_ranks());  // everyone takes rank 0's id
    ctx.allgather(&id, all.data(), sizeof(id));
    std::memcpy(&id, all.data(), sizeof(id));
    TL_CUDA_CHECK(cudaSetDevice(ctx.device()));
    nccl_check(ncclCommInitRank(&comm, ctx.num_ranks(), id, ctx.rank()), ctx, "ncclCommInitRank");
  }
  ~NcclState() {
    if (comm) ncclCommDestroy(comm);
  }
  ncclComm_t comm = nullptr;
};

}  // namespace

ncclComm_t nccl_comm(Context& ctx) { return ctx.op_state<NcclState>("runtime.nccl").comm; }

ncclDataType_t nccl_type(DType dtype) { return dtype == DType::bf16 ? ncclBfloat16 : ncclFloat16; }

void nccl_check(ncclResult_t r, const Context& ctx, const char* what) {
  if (r != ncclSuccess) detail::fail(what, " failed on rank ", ctx.rank(), ": ", ncclGetErrorString(r));
}

}  // namespace tilelink
