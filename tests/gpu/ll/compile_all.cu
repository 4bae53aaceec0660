// Instantiates every low-level primitive in kernels that are compiled for sm_90a but never
// launched (the multimem ones must never run: NVLS is off). A build of this file is the check.
#include <gtest/gtest.h>

#include "tilelink/ll.cuh"

namespace ll = tilelink::ll;

namespace {

__global__ void every_primitive(ll::Team t, char* dst, const char* src, size_t n, uint64_t* sig, int peer,
                                float* mc, uint64_t* mc_sig, uint64_t* out) {
  extern __shared__ __align__(128) char smem[];
  uint64_t acc = uint64_t(ll::rank(t)) + uint64_t(ll::num_ranks(t)) + uint64_t(ll::owner_of(t, src));
  acc += reinterpret_cast<uintptr_t>(ll::symm_at(t, dst, peer));
  acc += ll::globaltimer() + ll::smid();
  // memory order
  acc += ll::ld_acquire_sys(sig) + ll::ld_relaxed_gpu(sig) + ll::ld<ll::Order::acquire, ll::Scope::cta>(sig);
  ll::st_release_sys(sig, 1);
  ll::st_relaxed_gpu(sig, 2);
  ll::red_add_release_sys(sig, 1);
  acc += ll::atomic_add_acq_rel_sys(sig, 1) + ll::atomic_cas_acq_rel_sys(sig, 1, 2);
  ll::fence_acq_rel_gpu();
  ll::fence_sc<ll::Scope::sys>();
  // signals
  ll::signal_op(t, sig, 1, ll::SignalOp::set, peer);
  ll::signal_op<ll::Scope::gpu>(t, sig, 1, ll::SignalOp::add, peer);
  acc += ll::signal_wait_until(t, sig, ll::Cmp::ge, 1, {3, "compile_all"});
  acc += ll::signal_wait_until<ll::Scope::gpu, ll::Order::relaxed>(t, sig, ll::Cmp::ne, 0);
  // data
  ll::putmem(t, dst, src, n, peer);
  ll::putmem_nbi(t, dst, src, n, peer);
  ll::putmem_warp(t, dst, src, n, peer);
  ll::putmem_nbi_warp(t, dst, src, n, peer);
  ll::putmem_block(t, dst, src, n, peer);
  ll::putmem_nbi_block(t, dst, src, n, peer);
  ll::getmem(t, dst, src, n, peer);
  ll::getmem_nbi(t, dst, src, n, peer);
  ll::getmem_warp(t, dst, src, n, peer);
  ll::getmem_nbi_warp(t, dst, src, n, peer);
  ll::getmem_block(t, dst, src, n, peer);
  ll::getmem_nbi_block(t, dst, src, n, peer);
  ll::putmem_signal(t, dst, src, n, sig, 1, ll::SignalOp::set, peer);
  ll::putmem_signal_warp(t, dst, src, n, sig, 1, ll::SignalOp::add, peer);
  ll::putmem_signal_block<ll::Scope::gpu>(t, dst, src, n, sig, 1, ll::SignalOp::set, peer);
  ll::put_value(t, sig, uint64_t(5), peer);
  acc += ll::get_value(t, sig, peer);
  // TMA
  auto* bar = reinterpret_cast<uint64_t*>(smem);
  if (threadIdx.x == 0) {
    ll::mbarrier_init(bar, 1);
    ll::fence_mbarrier_init();
    ll::mbarrier_arrive_expect_tx(bar, 16);
    ll::tma_load_1d(smem + 128, src, 16, bar);
    ll::mbarrier_wait(t, bar, 0);
    acc += ll::mbarrier_try_wait(bar, 1);
    ll::tma_store_1d(ll::symm_at(t, dst, peer), smem + 128, 16);
    ll::tma_store_commit();
    ll::tma_store_wait_read<1>();
    ll::tma_store_wait<0>();
    ll::mbarrier_inval(bar);
  }
  ll::putmem_tma_block(t, dst, src, n, peer, smem, 4096);
  ll::getmem_tma_block(t, dst, src, n, peer, smem, 4096);
  ll::putmem_signal_tma_block(t, dst, src, n, sig, 1, ll::SignalOp::set, peer, smem, 4096);
  // ordering
  ll::fence();
  ll::quiet();
  ll::barrier_all_block(t);
  ll::sync_all_block(t);
  if (threadIdx.x < 32) {
    ll::barrier_all_warp(t);
    ll::sync_all_warp(t);
  }
  // multimem: compiled, never executed (NVLS is off)
  if (mc != nullptr) {
    float v = ll::multimem_ld_reduce_add_relaxed_sys_f32(mc);
    ll::multimem_st_relaxed_sys_f32(mc, v);
    uint4 w = ll::multimem_ld_reduce_add_relaxed_sys_bf16x2_v4(mc);
    ll::multimem_st_relaxed_sys_bf16x2_v4(mc, w);
    ll::multimem_red_add_release_sys_u64(mc_sig, 1);
  }
  out[threadIdx.x] = acc;
}

}  // namespace

TEST(LlCompile, EveryPrimitiveBuildsForSm90aAndLoads) {
  // The kernel above is never launched; asking for its attributes loads the sm_90a cubin.
  cudaFuncAttributes attr{};
  ASSERT_EQ(cudaFuncGetAttributes(&attr, every_primitive), cudaSuccess);
  EXPECT_GT(attr.numRegs, 0);
}
