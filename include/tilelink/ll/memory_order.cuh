// tilelink/ll/memory_order.cuh — loads, stores, reductions, atomics and fences whose memory order
// and scope are part of their name.
//
// Every cross-rank protocol in tilelink is built from these: a producer writes data, then
// publishes a flag with a *release* operation; a consumer reads the flag with an *acquire*
// operation and only then reads the data. Scope says who must observe the ordering: `gpu` for
// agents on the same device (ranks sharing one GPU, SMs and the copy engine of that GPU), `sys`
// for peers across NVLink/PCIe or the host. Using the generic templates `ld<Order, Scope>` etc.
// or the spelled-out aliases (`ld_acquire_sys`) gives the same PTX.
#pragma once

#include <cstdint>

#include "tilelink/ll/team.cuh"

namespace tilelink::ll {

enum class Scope { cta, gpu, sys };
enum class Order { relaxed, acquire, release, acq_rel };

#if defined(__CUDACC__)

namespace detail {
template <Scope S>
constexpr const char* scope_str() {
  if constexpr (S == Scope::cta) return "cta";
  else if constexpr (S == Scope::gpu) return "gpu";
  else return "sys";
}
}  // namespace detail

// ---- loads ---------------------------------------------------------------------------------
template <Order O, Scope S>
TL_DEVICE uint64_t ld(const uint64_t* p) {
  static_assert(O == Order::relaxed || O == Order::acquire, "a load is relaxed or acquire");
  uint64_t v;
  if constexpr (O == Order::relaxed && S == Scope::gpu)
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  else if constexpr (O == Order::relaxed && S == Scope::sys)
    asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  else if constexpr (O == Order::relaxed && S == Scope::cta)
    asm volatile("ld.relaxed.cta.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  else if constexpr (O == Order::acquire && S == Scope::gpu)
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  else if constexpr (O == Order::acquire && S == Scope::sys)
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  else
    asm volatile("ld.acquire.cta.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

template <Order O, Scope S>
TL_DEVICE uint32_t ld(const uint32_t* p) {
  static_assert(O == Order::relaxed || O == Order::acquire, "a load is relaxed or acquire");
  uint32_t v;
  if constexpr (O == Order::relaxed && S == Scope::gpu)
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  else if constexpr (O == Order::relaxed && S == Scope::sys)
    asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  else if constexpr (O == Order::relaxed && S == Scope::cta)
    asm volatile("ld.relaxed.cta.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  else if constexpr (O == Order::acquire && S == Scope::gpu)
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  else if constexpr (O == Order::acquire && S == Scope::sys)
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  else
    asm volatile("ld.acquire.cta.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// ---- stores --------------------------------------------------------------------------------
template <Order O, Scope S>
TL_DEVICE void st(uint64_t* p, uint64_t v) {
  static_assert(O == Order::relaxed || O == Order::release, "a store is relaxed or release");
  if constexpr (O == Order::relaxed && S == Scope::gpu)
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  else if constexpr (O == Order::relaxed && S == Scope::sys)
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  else if constexpr (O == Order::relaxed && S == Scope::cta)
    asm volatile("st.relaxed.cta.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  else if constexpr (O == Order::release && S == Scope::gpu)
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  else if constexpr (O == Order::release && S == Scope::sys)
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  else
    asm volatile("st.release.cta.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

template <Order O, Scope S>
TL_DEVICE void st(uint32_t* p, uint32_t v) {
  static_assert(O == Order::relaxed || O == Order::release, "a store is relaxed or release");
  if constexpr (O == Order::relaxed && S == Scope::gpu)
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
  else if constexpr (O == Order::relaxed && S == Scope::sys)
    asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
  else if constexpr (O == Order::relaxed && S == Scope::cta)
    asm volatile("st.relaxed.cta.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
  else if constexpr (O == Order::release && S == Scope::gpu)
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
  else if constexpr (O == Order::release && S == Scope::sys)
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
  else
    asm volatile("st.release.cta.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// ---- reductions (no return value) ---------------------------------------------------------
template <Order O, Scope S>
TL_DEVICE void red_add(uint64_t* p, uint64_t v) {
  static_assert(O == Order::relaxed || O == Order::release, "a reduction is relaxed or release");
  if constexpr (O == Order::relaxed && S == Scope::gpu)
    asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  else if constexpr (O == Order::relaxed && S == Scope::sys)
    asm volatile("red.relaxed.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  else if constexpr (O == Order::relaxed && S == Scope::cta)
    asm volatile("red.relaxed.cta.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  else if constexpr (O == Order::release && S == Scope::gpu)
    asm volatile("red.release.gpu.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  else if constexpr (O == Order::release && S == Scope::sys)
    asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  else
    asm volatile("red.release.cta.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

template <Order O, Scope S>
TL_DEVICE void red_max(uint64_t* p, uint64_t v) {
  static_assert(O == Order::relaxed || O == Order::release, "a reduction is relaxed or release");
  if constexpr (O == Order::relaxed && S == Scope::gpu)
    asm volatile("red.relaxed.gpu.global.max.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  else if constexpr (O == Order::relaxed && S == Scope::sys)
    asm volatile("red.relaxed.sys.global.max.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  else if constexpr (O == Order::relaxed && S == Scope::cta)
    asm volatile("red.relaxed.cta.global.max.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  else if constexpr (O == Order::release && S == Scope::gpu)
    asm volatile("red.release.gpu.global.max.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  else if constexpr (O == Order::release && S == Scope::sys)
    asm volatile("red.release.sys.global.max.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  else
    asm volatile("red.release.cta.global.max.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// ---- atomics (return the old value) -------------------------------------------------------
template <Order O, Scope S>
TL_DEVICE uint64_t atomic_add(uint64_t* p, uint64_t v) {
  uint64_t old;
  if constexpr (O == Order::relaxed && S == Scope::gpu)
    asm volatile("atom.relaxed.gpu.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  else if constexpr (O == Order::relaxed && S == Scope::sys)
    asm volatile("atom.relaxed.sys.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  else if constexpr (O == Order::acquire && S == Scope::gpu)
    asm volatile("atom.acquire.gpu.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  else if constexpr (O == Order::acquire && S == Scope::sys)
    asm volatile("atom.acquire.sys.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  else if constexpr (O == Order::release && S == Scope::gpu)
    asm volatile("atom.release.gpu.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  else if constexpr (O == Order::release && S == Scope::sys)
    asm volatile("atom.release.sys.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  else if constexpr (O == Order::acq_rel && S == Scope::gpu)
    asm volatile("atom.acq_rel.gpu.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  else if constexpr (O == Order::acq_rel && S == Scope::sys)
    asm volatile("atom.acq_rel.sys.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  else
    static_assert(S != Scope::cta, "cta-scope atomics on global memory are not offered");
  return old;
}

template <Order O, Scope S>
TL_DEVICE uint64_t atomic_cas(uint64_t* p, uint64_t compare, uint64_t v) {
  uint64_t old;
  if constexpr (O == Order::relaxed && S == Scope::gpu)
    asm volatile("atom.relaxed.gpu.global.cas.b64 %0, [%1], %2, %3;" : "=l"(old) : "l"(p), "l"(compare), "l"(v) : "memory");
  else if constexpr (O == Order::relaxed && S == Scope::sys)
    asm volatile("atom.relaxed.sys.global.cas.b64 %0, [%1], %2, %3;" : "=l"(old) : "l"(p), "l"(compare), "l"(v) : "memory");
  else if constexpr (O == Order::acq_rel && S == Scope::gpu)
    asm volatile("atom.acq_rel.gpu.global.cas.b64 %0, [%1], %2, %3;" : "=l"(old) : "l"(p), "l"(compare), "l"(v) : "memory");
  else if constexpr (O == Order::acq_rel && S == Scope::sys)
    asm volatile("atom.acq_rel.sys.global.cas.b64 %0, [%1], %2, %3;" : "=l"(old) : "l"(p), "l"(compare), "l"(v) : "memory");
  else
    static_assert(O == Order::relaxed || O == Order::acq_rel, "cas is relaxed or acq_rel (gpu/sys)");
  return old;
}

// ---- fences --------------------------------------------------------------------------------
template <Scope S>
TL_DEVICE void fence_acq_rel() {
  if constexpr (S == Scope::cta) asm volatile("fence.acq_rel.cta;" ::: "memory");
  else if constexpr (S == Scope::gpu) asm volatile("fence.acq_rel.gpu;" ::: "memory");
  else asm volatile("fence.acq_rel.sys;" ::: "memory");
}

template <Scope S>
TL_DEVICE void fence_sc() {
  if constexpr (S == Scope::cta) asm volatile("fence.sc.cta;" ::: "memory");
  else if constexpr (S == Scope::gpu) asm volatile("fence.sc.gpu;" ::: "memory");
  else asm volatile("fence.sc.sys;" ::: "memory");
}

// Orders this thread's generic-proxy global accesses with later async-proxy (TMA) accesses.
// Needed after acquiring a flag that guards data the TMA unit will read next, and after a bulk
// async store completed before publishing it with a generic release.
TL_DEVICE void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;" ::: "memory"); }
TL_DEVICE void fence_proxy_async_shared_cta() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// ---- spelled-out aliases: order and scope in the name ------------------------------------
TL_DEVICE uint64_t ld_relaxed_gpu(const uint64_t* p) { return ld<Order::relaxed, Scope::gpu>(p); }
TL_DEVICE uint64_t ld_relaxed_sys(const uint64_t* p) { return ld<Order::relaxed, Scope::sys>(p); }
TL_DEVICE uint64_t ld_acquire_gpu(const uint64_t* p) { return ld<Order::acquire, Scope::gpu>(p); }
TL_DEVICE uint64_t ld_acquire_sys(const uint64_t* p) { return ld<Order::acquire, Scope::sys>(p); }
TL_DEVICE void st_relaxed_gpu(uint64_t* p, uint64_t v) { st<Order::relaxed, Scope::gpu>(p, v); }
TL_DEVICE void st_relaxed_sys(uint64_t* p, uint64_t v) { st<Order::relaxed, Scope::sys>(p, v); }
TL_DEVICE void st_release_gpu(uint64_t* p, uint64_t v) { st<Order::release, Scope::gpu>(p, v); }
TL_DEVICE void st_release_sys(uint64_t* p, uint64_t v) { st<Order::release, Scope::sys>(p, v); }
TL_DEVICE void red_add_relaxed_gpu(uint64_t* p, uint64_t v) { red_add<Order::relaxed, Scope::gpu>(p, v); }
TL_DEVICE void red_add_release_gpu(uint64_t* p, uint64_t v) { red_add<Order::release, Scope::gpu>(p, v); }
TL_DEVICE void red_add_release_sys(uint64_t* p, uint64_t v) { red_add<Order::release, Scope::sys>(p, v); }
TL_DEVICE void red_max_release_gpu(uint64_t* p, uint64_t v) { red_max<Order::release, Scope::gpu>(p, v); }
TL_DEVICE void red_max_release_sys(uint64_t* p, uint64_t v) { red_max<Order::release, Scope::sys>(p, v); }
TL_DEVICE uint64_t atomic_add_acq_rel_sys(uint64_t* p, uint64_t v) { return atomic_add<Order::acq_rel, Scope::sys>(p, v); }
TL_DEVICE uint64_t atomic_cas_acq_rel_sys(uint64_t* p, uint64_t c, uint64_t v) { return atomic_cas<Order::acq_rel, Scope::sys>(p, c, v); }
TL_DEVICE void fence_acq_rel_gpu() { fence_acq_rel<Scope::gpu>(); }
TL_DEVICE void fence_acq_rel_sys() { fence_acq_rel<Scope::sys>(); }

#endif  // __CUDACC__

}  // namespace tilelink::ll
