// src/gemm/cublas_gemm.cpp — see tilelink/gemm/cublas_gemm.hpp.
#include "tilelink/gemm/cublas_gemm.hpp"

#include <cstring>
#include <memory>
#include <string>

#include "tilelink/core/error.hpp"

namespace tilelink::gemm {

namespace {

void check_lt(cublasStatus_t s, const char* call, int64_t m, int64_t n, int64_t k) {
  TL_REQUIRE(s == CUBLAS_STATUS_SUCCESS, call, " failed: ", cublasGetStatusName(s), " (", cublasGetStatusString(s),
             ") for the GEMM m=", m, " n=", n, " k=", k);
}

// Up to 256 bytes, as PyTorch and TransformerEngine tell cuBLASLt: some of its Hopper kernels
// need more than 16, and a heuristic told less never offers them.
int64_t alignment(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  int64_t a = 256;
  while (a > 1 && v % uint64_t(a) != 0) a /= 2;
  return a;
}

// cuBLASLt's tile, stage-count and cluster-shape ids by name, from the toolkit's header.
struct LtName {
  const char* kind;  // "TILE", "STAGES" or "CLUSTER_SHAPE"
  int id;
  const char* name;  // "128x256", "64x4", "2x1x1"
};
constexpr LtName kLtNames[] = {
#include "cublaslt_names.inc"
};

std::string lt_name(const char* kind, uint64_t id) {
  for (const LtName& n : kLtNames)
    if (std::strcmp(n.kind, kind) == 0 && uint64_t(n.id) == id) return n.name;
  return id == 0 ? "?" : "#" + std::to_string(id);
}

// "AxB[x1]" as "BxA": cuBLASLt's first dimension is the engine's N.
std::string swap_dims(const std::string& name) {
  const size_t x = name.find('x');
  if (x == std::string::npos) return name;
  const size_t end = name.find('x', x + 1);
  return name.substr(x + 1, end == std::string::npos ? std::string::npos : end - x - 1) + "x" + name.substr(0, x);
}

}  // namespace

// Row-major D = A·Bᵀ is column-major Dᵀ = B·Aᵀ: cuBLASLt's first operand is our B (k x n,
// transposed), its second our A (k x m), its output our D (n x m).
struct CublasGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (out) cublasLtMatrixLayoutDestroy(out);
    if (second) cublasLtMatrixLayoutDestroy(second);
    if (first) cublasLtMatrixLayoutDestroy(first);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

CublasGemm::CublasGemm(cudaStream_t stream) : stream_(stream) {
  TL_REQUIRE(cublasLtCreate(&handle_) == CUBLAS_STATUS_SUCCESS, "cublasLtCreate failed");
  workspace_bytes_ = size_t(32) << 20;
  TL_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
}

CublasGemm::~CublasGemm() {
  plans_.clear();
  cublasLtDestroy(handle_);
  cudaFree(workspace_);
}

const CublasGemm::Plan& CublasGemm::plan(const Key& key) {
  if (auto it = plans_.find(key); it != plans_.end()) return *it->second;
  const auto [dtype, m, n, k, align_a, align_b, align_d] = key;
  const cudaDataType_t t = DType(dtype) == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
  auto p = std::make_unique<Plan>();
  check_lt(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate", m, n, k);
  const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
  check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose),
           "cublasLtMatmulDescSetAttribute(TRANSA)", m, n, k);
  check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof keep),
           "cublasLtMatmulDescSetAttribute(TRANSB)", m, n, k);
  check_lt(cublasLtMatrixLayoutCreate(&p->first, t, uint64_t(k), uint64_t(n), k), "cublasLtMatrixLayoutCreate(B)", m,
           n, k);
  check_lt(cublasLtMatrixLayoutCreate(&p->second, t, uint64_t(k), uint64_t(m), k), "cublasLtMatrixLayoutCreate(A)",
           m, n, k);
  check_lt(cublasLtMatrixLayoutCreate(&p->out, t, uint64_t(n), uint64_t(m), n), "cublasLtMatrixLayoutCreate(D)", m,
           n, k);

  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate", m, n, k);
  const uint32_t first_align = uint32_t(align_b), second_align = uint32_t(align_a), out_align = uint32_t(align_d);
  const cublasLtMatmulPreferenceAttributes_t attrs[] = {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                         CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                         CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                         CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  const uint32_t values[] = {first_align, second_align, out_align, out_align};
  cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                          &workspace_bytes_, sizeof workspace_bytes_);
  for (int i = 0; i < 4 && s == CUBLAS_STATUS_SUCCESS; ++i)
    s = cublasLtMatmulPreferenceSetAttribute(pref, attrs[i], &values[i], sizeof values[i]);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulAlgoGetHeuristic(handle_, p->desc, p->first, p->second, p->out, p->out, pref, 1, &result,
                                       &found);
  cublasLtMatmulPreferenceDestroy(pref);
  check_lt(s, "cublasLtMatmulAlgoGetHeuristic", m, n, k);
  TL_REQUIRE(found > 0, "cuBLASLt found no algorithm for the GEMM m=", m, " n=", n, " k=", k);
  p->algo = result.algo;
  return *(plans_[key] = std::move(p));
}

void CublasGemm::run(DType dt, const void* a, const void* b, void* d, int64_t m, int64_t n, int64_t k,
                     std::optional<cudaStream_t> stream) {
  const Plan& p = plan({int64_t(dt), m, n, k, alignment(a), alignment(b), alignment(d)});
  const float alpha = 1.0f, beta = 0.0f;
  check_lt(cublasLtMatmul(handle_, p.desc, &alpha, b, p.first, a, p.second, &beta, d, p.out, d, p.out, &p.algo,
                          workspace_, workspace_bytes_, stream.value_or(stream_)),
           "cublasLtMatmul", m, n, k);
}

std::string CublasGemm::algorithm(DType dt, const void* a, const void* b, const void* d, int64_t m, int64_t n,
                                  int64_t k) {
  const Plan& p = plan({int64_t(dt), m, n, k, alignment(a), alignment(b), alignment(d)});
  // The attributes are 2 or 4 bytes wide: ask the size, then read that many (little-endian).
  const auto get = [&](cublasLtMatmulAlgoConfigAttributes_t attr) -> uint64_t {
    size_t size = 0;
    uint64_t value = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(&p.algo, attr, nullptr, 0, &size) != CUBLAS_STATUS_SUCCESS ||
        size > sizeof value ||
        cublasLtMatmulAlgoConfigGetAttribute(&p.algo, attr, &value, size, &size) != CUBLAS_STATUS_SUCCESS)
      return 0;
    return value;
  };
  const uint64_t splits = get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
  std::string text = "tile " + swap_dims(lt_name("TILE", get(CUBLASLT_ALGO_CONFIG_TILE_ID)));
  text += " cluster " + swap_dims(lt_name("CLUSTER_SHAPE", get(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID)));
  text += " stages " + lt_name("STAGES", get(CUBLASLT_ALGO_CONFIG_STAGES_ID));
  text += " splitk " + std::to_string(splits);
  if (splits > 1) text += " reduction " + std::to_string(get(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME));
  text += " swizzle " + std::to_string(get(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING));
  text += " algo " + std::to_string(int32_t(uint32_t(get(CUBLASLT_ALGO_CONFIG_ID))));
  text += " option " + std::to_string(get(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION));
  return text;
}

}  // namespace tilelink::gemm
