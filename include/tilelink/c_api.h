/* tilelink/c_api.h — a C interface to tilelink's worlds and ops, for foreign-function callers
 * (the Python package loads libtilelink_c.so through ctypes) and for C programs.
 *
 * Every function returns TL_OK or TL_ERROR; after TL_ERROR, tl_last_error() gives the message
 * (per thread, until the next failing call on that thread). Collective functions must be called
 * by every rank of the world, in the same order.
 *
 *   tl_world* w;
 *   tl_world_create(rank, size, device, my_allgather, my_barrier, my_state, NULL, &w);
 *   tl_ag_gemm(w, TL_BF16, a, b, c, m_per_rank, n, k, NULL, TL_PATH_AUTO, stream);
 *   tl_world_destroy(w);
 */
#ifndef TILELINK_C_API_H
#define TILELINK_C_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TILELINK_C_API_VERSION 6

enum { TL_OK = 0, TL_ERROR = 1 };
enum { TL_BF16 = 0, TL_FP16 = 1 };                                  /* element types */
enum { TL_PATH_AUTO = 0, TL_PATH_FUSED = 1, TL_PATH_DECOMPOSED = 2 };  /* fused or not */
/* How the ranks reach each other's heaps: automatic = $TILELINK_TRANSPORT, else CUDA IPC. */
enum { TL_TRANSPORT_AUTO = 0, TL_TRANSPORT_CUDA_IPC = 1, TL_TRANSPORT_NVSHMEM = 2 };

typedef struct tl_world tl_world;

/* The caller's bootstrap (e.g. torch.distributed): gather `bytes` from every rank into `all`
 * (size * bytes, in rank order), and a barrier. Return 0 on success, anything else on failure.
 * They are called on the thread that called into tilelink, during tl_world_create, during
 * tl_world_destroy, and during op calls that must check their arguments agree across ranks. */
typedef int (*tl_allgather_fn)(void* state, const void* mine, void* all, size_t bytes);
typedef int (*tl_barrier_fn)(void* state);

typedef struct {
  size_t heap_bytes;        /* symmetric heap per rank; 0: $TILELINK_HEAP_MB MiB, else 2048 MiB */
  size_t signal_slots;      /* 0: $TILELINK_SIGNAL_SLOTS, else 65536 */
  uint64_t wait_timeout_ms; /* bound on device-side waits; 0: $TILELINK_WAIT_TIMEOUT_MS, else 5000 */
  int transport;            /* TL_TRANSPORT_* */
} tl_world_options;

typedef struct {
  int rank, size, device;
  int sm_count;          /* SMs each rank's kernels may use */
  int max_ranks_per_gpu; /* 1: every rank has its own GPU */
  size_t heap_bytes, heap_free;
  char transport[16];    /* "CUDA IPC" or "NVSHMEM" */
} tl_world_info;

int tl_api_version(void);
const char* tl_last_error(void);

/* Collective. One rank per process, on GPU `device`; peers' heaps are mapped with CUDA IPC or
 * NVSHMEM (options->transport; all ranks on one node). `options` may be NULL. With NVSHMEM, the
 * world initialises NVSHMEM over the callbacks (or joins the program's own initialisation). */
int tl_world_create(int rank, int size, int device, tl_allgather_fn allgather, tl_barrier_fn barrier,
                    void* state, const tl_world_options* options, tl_world** out);
/* Collective. Waits for the world's work, unmaps the peers and frees the heap. */
int tl_world_destroy(tl_world* world);
int tl_world_query(tl_world* world, tl_world_info* info);
/* Waits for `stream` (the stream this rank's op calls ran on; NULL: the legacy default stream),
 * then fails with the error of any call a timed-out device wait aborted since the last check (on
 * this rank, or on another rank in the same call). Each fault is reported once; the world stays
 * usable. An op call also fails for a fault its own rank's waits saw. */
int tl_world_check(tl_world* world, void* stream);

/* Collective: `bytes` of symmetric memory (same offset on every rank), 1 KiB aligned, zeroed
 * by nobody, valid until the world is destroyed. */
int tl_symmetric_alloc(tl_world* world, size_t bytes, void** out);
/* The address of the symmetric object `local` on rank `peer`, as mapped in this process. */
int tl_peer_pointer(tl_world* world, void* local, int peer, void** out);

/* The ops, SPMD on every rank, enqueued on `stream` (a cudaStream_t; NULL is the legacy default
 * stream). Row-major operands; see tilelink/ops/<op>/<op>.hpp for the shapes.
 *   ag_gemm: c[size*m_per_rank, n] = allgather(a[m_per_rank, k]) . b[n, k]^T
 *   gemm_rs: c[m/size, n] = this rank's rows of sum over ranks of a[m, k] . b[n, k]^T
 *   gemm_ar: c[m, n] = sum over ranks of a[m, k] . b[n, k]^T
 * A call may be captured in a CUDA graph once the same call (shape, path) was made outside a
 * capture; inside a capture a first call fails (the error says so). */
int tl_ag_gemm(tl_world* world, int dtype, const void* a, const void* b, void* c, int64_t m_per_rank, int64_t n,
               int64_t k, void* a_gathered, int path, void* stream);
int tl_gemm_rs(tl_world* world, int dtype, const void* a, const void* b, void* c, int64_t m, int64_t n, int64_t k,
               int path, void* stream);
int tl_gemm_ar(tl_world* world, int dtype, const void* a, const void* b, void* c, int64_t m, int64_t n, int64_t k,
               int path, void* stream);
/* out[size * bytes] = every rank's in[bytes], in rank order, on every rank: the low-latency
 * AllGather for small messages (bytes a multiple of 8, at most 8 MiB; in and out 8-byte aligned). */
int tl_allgather_ll(tl_world* world, const void* in, void* out, int64_t bytes, void* stream);
/* Decode attention over a KV cache split across the ranks: q[batch, q_heads, head_dim] (the same
 * on every rank), this rank's k, v[batch, kv_len, kv_heads, head_dim], out[batch, q_heads,
 * head_dim] on every rank; head_dim 64 or 128; scale 0: 1/sqrt(head_dim). */
int tl_flash_decode(tl_world* world, int dtype, const void* q, const void* k, const void* v, void* out, int64_t batch,
                    int64_t q_heads, int64_t kv_heads, int64_t head_dim, int64_t kv_len, float scale, void* stream);
/* Mixture of experts, first GEMM: y[t*topk + j] = x_gathered[t] . w[topk_ids[t, j]]^T for the
 * world * m_per_rank gathered tokens; x[m_per_rank, hidden] this rank's tokens, topk_ids
 * [world * m_per_rank, topk] int32 (the same on every rank), w[num_experts, n, hidden] this rank's
 * slice, y[world * m_per_rank * topk, n]. sorted_rows (optional, int32 [M * topk]): y then holds
 * the expert-sorted rows and sorted_rows[t*topk + j] the row of entry (t, j). */
int tl_ag_moe(tl_world* world, int dtype, const void* x, const int32_t* topk_ids, const void* w, void* y,
              int64_t m_per_rank, int64_t hidden, int64_t n, int32_t num_experts, int32_t topk, int32_t* sorted_rows,
              int path, void* stream);
/* Mixture of experts, second GEMM: out[tokens / world, hidden] = this rank's tokens' rows of the sum
 * over ranks of sum_j topk_weights[t, j] * h[t*topk + j] . w[topk_ids[t, j]]^T; h[tokens * topk,
 * k_shard], w[num_experts, hidden, k_shard], topk_ids int32 and topk_weights float [tokens, topk]
 * (the same on every rank). h_rows (optional, int32 [tokens * topk]): h's row of each entry, as
 * tl_ag_moe's sorted_rows returns it; NULL: h in token order. */
int tl_moe_rs(tl_world* world, int dtype, const void* h, const int32_t* topk_ids, const float* topk_weights,
              const void* w, void* out, int64_t tokens, int64_t hidden, int64_t k_shard, int32_t num_experts,
              int32_t topk, const int32_t* h_rows, int path, void* stream);
/* The grouped GEMM alone (no world): for each group g, rows [group_end[g-1], group_end[g]) of
 * a[max_rows, k] times b[g][n, k]^T into the same rows of d[max_rows, n]; group_end on the device
 * (what torch._grouped_mm calls offs). */
int tl_grouped_gemm(int dtype, const void* a, const void* b, void* d, int64_t n, int64_t k, int32_t num_groups,
                    const int32_t* group_end, int64_t max_rows, void* stream);
/* The plain GEMM alone (no world): d[m, n] = a[m, k] b[n, k]^T (F.linear's layout), the rows of
 * a, b and d lda, ldb and ldd elements apart (0: packed, i.e. k, k and n). n, k and the leading
 * dimensions multiples of 8, the pointers 16-byte aligned. The engine's rule picks the kernel,
 * or, with tuning on, the fastest of the rule's best few plans timed once per new shape. */
int tl_gemm(int dtype, const void* a, const void* b, void* d, int64_t m, int64_t n, int64_t k, int64_t lda,
            int64_t ldb, int64_t ldd, void* stream);
/* Plain-GEMM tuning, for the whole process (TILELINK_GEMM_TUNE=1 turns it on at start; see
 * tilelink/gemm/tuning.hpp). A tuning call blocks the host until its timings are done. */
int tl_gemm_set_tuning(int on);
int tl_gemm_tuning(int* on);
/* Tuned plans on disk (CSV lines; TILELINK_GEMM_TUNE_FILE does both automatically): load takes
 * the lines tuned on this GPU model, save writes every tuned plan; *lines (may be NULL) gets the
 * count. clear forgets the process's tuned plans. */
int tl_gemm_load_tuned_plans(const char* path, size_t* lines);
int tl_gemm_save_tuned_plans(const char* path, size_t* lines);
int tl_gemm_clear_tuned_plans(void);
/* Sequence-parallel attention: q[batch, local_len, q_heads, head_dim], k and v [batch, local_len,
 * kv_heads, head_dim] (contiguous) are this rank's shard of each sequence; out (same shape as q)
 * and lse (fp32 [batch, q_heads, local_len], may be NULL) its queries' attention over the whole
 * sequence. sharding: 0 contiguous (rank r holds positions [r L, (r+1) L)), 1 zig-zag (chunks r
 * and 2W-1-r of length L/2). See tilelink/ops/sp_attention/sp_attention.hpp. */
int tl_sp_attention(tl_world* world, int dtype, const void* q, const void* k, const void* v, void* out, float* lse,
                    int64_t batch, int64_t local_len, int64_t q_heads, int64_t kv_heads, int64_t head_dim, int causal,
                    int sharding, float scale, int path, void* stream);
/* Attention forward on one GPU (no world): out[b, i, h, :] and lse[b, h, i] (fp32, natural log;
 * may be NULL) of softmax(scale q k^T + mask) v, grouped-query (q_heads a multiple of kv_heads).
 * strides: 12 values (elements) — q, k, v, out, each {batch, row, head}; head_dim contiguous;
 * NULL: contiguous [batch, rows, heads, head_dim]. causal hides key j from query i when
 * j > i + q_position0. scale 0: 1/sqrt(head_dim). See tilelink/attention/attention.hpp. */
int tl_attention_forward(int dtype, const void* q, const void* k, const void* v, void* out, float* lse, int64_t batch,
                         int64_t q_len, int64_t kv_len, int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                         const int64_t* strides, int causal, int64_t q_position0, float scale, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* TILELINK_C_API_H */
