// The process's table of tuned plain-GEMM plans (tilelink/gemm/tuning.hpp): what gemm() consults
// when tuning is on, and its file form (TILELINK_GEMM_TUNE_FILE, load/save_tuned_plans).
#include <cuda_runtime.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <vector>

#include "heuristic/plain_plan.hpp"
#include "text_fields.hpp"
#include "tilelink/core/error.hpp"
#include "tilelink/core/stream_capture.hpp"
#include "tilelink/gemm/plan_text.hpp"
#include "tilelink/gemm/tuning.hpp"

namespace tilelink::gemm {
namespace {

// Per (device, dtype, packed shape, SMs).
using TuneKey = std::array<int64_t, 9>;
struct Tuned {
  GemmPlan plan;
  double us;
};
struct TunedPlans {
  std::mutex mutex;
  std::map<TuneKey, Tuned> plans;
  bool file_read = false;  // TILELINK_GEMM_TUNE_FILE read (or found unset) since the last clear
  std::string file;        // where gemm() appends what it tunes; empty: nowhere
};
TunedPlans& tuned() {
  static TunedPlans* t = new TunedPlans;  // outlives every thread that may still call gemm()
  return *t;
}

TuneKey key_of(int device, DType dtype, const GemmShape& s, int sms) {
  return {device, int64_t(dtype), s.M, s.N, s.K, s.lda, s.ldb, s.ldd, sms};
}

// Whether tuning may time `plan` for the shape (any config the rule ranks, at any division
// tuning tries): what a file may make gemm() run.
bool tuning_may_time(const GemmShape& s, int sms, const GemmPlan& plan) {
  GemmTuning every;
  every.candidates = kNumGemmConfigs;
  for (const GemmPlan& p : tuning_plans(s, sms, every))
    if (p == plan) return true;
  return false;
}

// Takes the file's lines for this process's GPUs into the table (caller holds the lock).
size_t take_lines(const std::string& path) {
  std::ifstream in(path);
  TL_REQUIRE(in.good(), "gemm tuning: cannot read tuned plans from '", path, "': ", std::strerror(errno));
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  std::vector<std::string> models;
  for (int d = 0; d < devices; ++d) models.push_back(detail::gpu_model_name(d));
  size_t taken = 0;
  int number = 0;
  for (std::string text; std::getline(in, text);) {
    ++number;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.empty() || text[0] == '#') continue;
    detail::TunedLine line;
    bool known = false;
    std::string why;
    TL_REQUIRE(detail::parse_tuned_line(text, &line, &known, &why), "gemm tuning: ", path, ":", number, ": ", why);
    if (!known || !tuning_may_time(line.shape, line.sms, line.plan)) continue;
    bool took = false;
    for (int d = 0; d < devices; ++d) {
      if (models[size_t(d)] != line.gpu) continue;
      took |= tuned().plans.emplace(key_of(d, line.dtype, line.shape, line.sms), Tuned{line.plan, line.us}).second;
    }
    taken += took ? 1 : 0;
  }
  TL_REQUIRE(!in.bad(), "gemm tuning: error reading '", path, "'");
  return taken;
}

// TILELINK_GEMM_TUNE_FILE, once per clear (caller holds the lock).
void read_env_file_once() {
  TunedPlans& t = tuned();
  if (t.file_read) return;
  const char* env = std::getenv("TILELINK_GEMM_TUNE_FILE");
  const std::string path = env ? env : "";
  if (!path.empty())
    if (FILE* f = std::fopen(path.c_str(), "r")) {
      std::fclose(f);
      take_lines(path);  // a malformed file throws here at every call until it is mended
    }
  t.file = path;
  t.file_read = true;
}

// One line appended with one write, so that processes sharing the file never interleave within
// a line (O_APPEND on a local file system).
void append_line(const std::string& path, const std::string& line) {
  FILE* f = std::fopen(path.c_str(), "a");
  TL_REQUIRE(f != nullptr, "gemm tuning: cannot append to TILELINK_GEMM_TUNE_FILE '", path,
             "': ", std::strerror(errno));
  const std::string text = line + "\n";
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  TL_REQUIRE(ok && closed, "gemm tuning: cannot append to TILELINK_GEMM_TUNE_FILE '", path, "'");
}

constexpr const char* kHeader = "# tilelink tuned GEMM plans: gpu,dtype,M,N,K,lda,ldb,ldd,sms,plan,us";

}  // namespace

void clear_tuned_plans() {
  std::lock_guard<std::mutex> lock(tuned().mutex);
  tuned().plans.clear();
  tuned().file_read = false;
}

size_t tuned_plan_count() {
  std::lock_guard<std::mutex> lock(tuned().mutex);
  return tuned().plans.size();
}

size_t load_tuned_plans(const std::string& path) {
  std::lock_guard<std::mutex> lock(tuned().mutex);
  return take_lines(path);
}

size_t save_tuned_plans(const std::string& path) {
  std::lock_guard<std::mutex> lock(tuned().mutex);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    TL_REQUIRE(out.good(), "gemm tuning: cannot write '", tmp, "': ", std::strerror(errno));
    out << kHeader << "\n";
    std::map<int64_t, std::string> models;  // per device: a properties query is slow
    for (const auto& [key, t] : tuned().plans) {
      detail::TunedLine line;
      auto model = models.find(key[0]);
      if (model == models.end()) model = models.emplace(key[0], detail::gpu_model_name(int(key[0]))).first;
      line.gpu = model->second;
      line.dtype = static_cast<DType>(key[1]);
      line.shape = {key[2], key[3], key[4], key[5], key[6], key[7]};
      line.sms = int(key[8]);
      line.plan = t.plan;
      line.us = t.us;
      out << detail::tuned_line_text(line) << "\n";
    }
    out.flush();
    TL_REQUIRE(out.good(), "gemm tuning: error writing '", tmp, "'");
  }
  TL_REQUIRE(std::rename(tmp.c_str(), path.c_str()) == 0, "gemm tuning: cannot replace '", path,
             "': ", std::strerror(errno));
  return tuned().plans.size();
}

namespace detail {

std::string gpu_model_name(int device) {
  cudaDeviceProp prop{};
  const cudaError_t e = cudaGetDeviceProperties(&prop, device);
  TL_REQUIRE(e == cudaSuccess, "gemm tuning: cudaGetDeviceProperties(", device, ") failed: ", cudaGetErrorString(e));
  std::string name = prop.name;
  for (char& c : name)
    if (c == ',' || c == '\n') c = ' ';
  return name + ":" + std::to_string(prop.multiProcessorCount);
}

std::string tuned_line_text(const TunedLine& l) {
  char us[32];
  std::snprintf(us, sizeof us, "%.2f", l.us);
  const GemmShape& s = l.shape;
  return l.gpu + "," + dtype_name(l.dtype) + "," + std::to_string(s.M) + "," + std::to_string(s.N) + "," +
         std::to_string(s.K) + "," + std::to_string(s.lda) + "," + std::to_string(s.ldb) + "," +
         std::to_string(s.ldd) + "," + std::to_string(l.sms) + "," + plan_text(l.plan) + "," + us;
}

bool parse_tuned_line(const std::string& text, TunedLine* out, bool* known, std::string* why) {
  const auto fail = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  const std::vector<std::string> f = detail::split_fields(text, ',');
  if (f.size() != 11)
    return fail("want 11 fields (gpu,dtype,M,N,K,lda,ldb,ldd,sms,plan,us), got " + std::to_string(f.size()));
  TunedLine l;
  l.gpu = f[0];
  if (l.gpu.empty()) return fail("empty gpu field");
  if (f[1] == "bf16") {
    l.dtype = DType::bf16;
  } else if (f[1] == "fp16") {
    l.dtype = DType::fp16;
  } else {
    return fail("dtype '" + f[1] + "' is not bf16 or fp16");
  }
  int64_t dims[6];
  const char* names[6] = {"M", "N", "K", "lda", "ldb", "ldd"};
  for (int i = 0; i < 6; ++i)
    if (!detail::whole_integer(f[2 + size_t(i)], 1, (int64_t(1) << 31) - 1, &dims[i]))
      return fail(std::string(names[i]) + " '" + f[2 + size_t(i)] + "' is not an integer in 1..2^31-1");
  l.shape = {dims[0], dims[1], dims[2], dims[3], dims[4], dims[5]};
  if (l.shape.lda < l.shape.K || l.shape.ldb < l.shape.K || l.shape.ldd < l.shape.N)
    return fail("leading dimensions below K, K, N");
  int64_t sms = 0;
  if (!detail::whole_integer(f[8], 1, 4096, &sms)) return fail("sms '" + f[8] + "' is not an integer in 1..4096");
  l.sms = int(sms);
  char* end = nullptr;
  l.us = std::strtod(f[10].c_str(), &end);
  if (f[10].empty() || end != f[10].c_str() + f[10].size() || !std::isfinite(l.us) || l.us < 0)
    return fail("us '" + f[10] + "' is not a non-negative number");
  // A config this build lacks is another build's line, not a malformed one; any other error is.
  GemmConfig config{};
  *known = parse_config(f[9].substr(0, f[9].find('/')), &config);
  std::string plan_why;
  if (*known && !parse_plan(f[9], &l.plan, &plan_why)) return fail(plan_why);
  *out = l;
  return true;
}

GemmPlan plain_call_plan(DType dtype, const void* A, const void* B, void* D, const GemmShape& shape, int sm_budget,
                         cudaStream_t stream) {
  if (!plain_gemm_tuning()) return plain_plan(shape, dtype, sm_budget);
  const GemmShape s = packed(shape);
  if (s.M <= 0 || s.N <= 0) return plain_plan(shape, dtype, sm_budget);
  const int device = current_device_or_throw("gemm tuning");
  const int sms = sm_budget > 0 ? sm_budget : device_sm_count(device);
  const TuneKey key = key_of(device, dtype, s, sms);
  {
    std::lock_guard<std::mutex> lock(tuned().mutex);
    read_env_file_once();
    const auto it = tuned().plans.find(key);
    if (it != tuned().plans.end()) return it->second.plan;
  }
  if (tilelink::detail::stream_capturing(stream)) return plain_plan(shape, dtype, sm_budget);
  // Two threads tuning one shape at once both time it; the first result stays.
  const GemmTuneResult r = tune_plain_gemm(dtype, A, B, D, shape, sm_budget, stream);
  const Tuned t{r.plans[size_t(r.best)], r.us[size_t(r.best)]};
  std::lock_guard<std::mutex> lock(tuned().mutex);
  const auto [it, added] = tuned().plans.emplace(key, t);
  if (added && !tuned().file.empty()) {
    TunedLine line{gpu_model_name(device), dtype, s, sms, t.plan, t.us};
    append_line(tuned().file, tuned_line_text(line));
  }
  return it->second.plan;
}

}  // namespace detail
}  // namespace tilelink::gemm
