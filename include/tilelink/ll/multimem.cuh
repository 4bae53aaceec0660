// tilelink/ll/multimem.cuh — NVLS multimem operations on a multicast address.
//
// DECLARED ONLY. They compile for sm_90a, but NVLS is disabled on the machines tilelink runs on:
// the runtime never creates a multicast object (never calls cuMulticastCreate), no tilelink op or
// test calls these, and calling them on a non-multicast address is undefined. They exist so the
// primitive set is complete and a future NVLS backend has its contracts in place.
//
//   multimem_ld_reduce_add_relaxed_sys_f32(mc)        sum over all ranks of the f32 at mc
//   multimem_ld_reduce_add_relaxed_sys_bf16x2_v4(mc)  16 bytes of bf16x2 summed (f32 accumulate)
//   multimem_st_relaxed_sys_f32(mc, v)                store v on every rank
//   multimem_st_relaxed_sys_bf16x2_v4(mc, v)          store 16 bytes on every rank
//   multimem_red_add_release_sys_u64(mc, v)           add v on every rank (a broadcast signal add)
#pragma once

#include <cstdint>

#include "tilelink/ll/team.cuh"

namespace tilelink::ll {

#if defined(__CUDACC__)

TL_DEVICE float multimem_ld_reduce_add_relaxed_sys_f32(const float* mc) {
  float v;
  asm volatile("multimem.ld_reduce.relaxed.sys.global.add.f32 %0, [%1];" : "=f"(v) : "l"(mc) : "memory");
  return v;
}

TL_DEVICE uint4 multimem_ld_reduce_add_relaxed_sys_bf16x2_v4(const void* mc) {
  uint4 v;
  asm volatile("multimem.ld_reduce.relaxed.sys.global.add.acc::f32.v4.bf16x2 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(mc)
               : "memory");
  return v;
}

TL_DEVICE void multimem_st_relaxed_sys_f32(float* mc, float v) {
  asm volatile("multimem.st.relaxed.sys.global.f32 [%0], %1;" ::"l"(mc), "f"(v) : "memory");
}

TL_DEVICE void multimem_st_relaxed_sys_bf16x2_v4(void* mc, uint4 v) {
  asm volatile("multimem.st.relaxed.sys.global.v4.bf16x2 [%0], {%1, %2, %3, %4};" ::"l"(mc), "r"(v.x),
               "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

TL_DEVICE void multimem_red_add_release_sys_u64(uint64_t* mc, uint64_t v) {
  asm volatile("multimem.red.release.sys.global.add.u64 [%0], %1;" ::"l"(mc), "l"(v) : "memory");
}

#endif  // __CUDACC__

}  // namespace tilelink::ll
