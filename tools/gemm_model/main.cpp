// tilelink-gemm-model: the plain GEMM's time models applied to measured rows, for fitting them.
//
//   tilelink-bench gemm --alone --csv times.csv ...          (on the GPU)
//   tilelink-gemm-model [--model rule|few_rows|mid_rows|many_rows] [--sms 132] < times.csv > terms.csv
//   scripts/fit_gemm_times.py terms.csv                       (fits, checks out of sample)
//
// Reads the bench's CSV (header mode,group,M,N,K,config,...,ms,...,cublas_ms,...,plan) and writes
// each row back with the model's terms for its plan and its shared constants (the model's form:
// src/gemm/heuristic/time_models.hpp) and, where the model has constants for the config (on rows
// they were fitted for), those and the predicted time. `rule` (the default) applies the model the
// plain GEMM uses on the row's shape. mid_rows and many_rows have the same terms (their constants
// differ). Host only: no GPU.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gemm/heuristic/time_models.hpp"
#include "gemm/text_fields.hpp"
#include "tilelink/gemm/gemm.hpp"
#include "tilelink/gemm/plan_text.hpp"

namespace {

namespace g = tilelink::gemm;
namespace h = tilelink::gemm::heuristic;

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "tilelink-gemm-model: %s\n", why.c_str());
  std::exit(2);
}

// The bench's plan string (tilelink/gemm/plan_text.hpp).
g::GemmPlan parse_plan(const std::string& text) {
  g::GemmPlan plan;
  std::string why;
  if (!g::parse_plan(text, &plan, &why)) die(why);
  return plan;
}

constexpr const char* kModelNames[] = {"few_rows", "mid_rows", "many_rows"};
static_assert(int(h::TimeModel::few_rows) == 0 && int(h::TimeModel::mid_rows) == 1 &&
              int(h::TimeModel::many_rows) == 2);

std::optional<h::TimeModel> model_named(const std::string& name) {
  for (size_t i = 0; i < std::size(kModelNames); ++i)
    if (name == kModelNames[i]) return h::TimeModel(i);
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  std::string which = "rule";
  int sms = 132;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--model" && i + 1 < argc) {
      which = argv[++i];
    } else if (a == "--sms" && i + 1 < argc) {
      sms = std::atoi(argv[++i]);
    } else {
      std::fprintf(a == "--help" ? stdout : stderr,
                   "usage: tilelink-gemm-model [--model rule|few_rows|mid_rows|many_rows] [--sms N] < bench.csv > "
                   "terms.csv\n");
      return a == "--help" ? 0 : 2;
    }
  }
  const std::optional<h::TimeModel> named = model_named(which);
  if (which != "rule" && !named) die("--model must be rule, few_rows, mid_rows or many_rows");
  if (sms < 1) die("--sms must be >= 1");

  std::string line;
  if (!std::getline(std::cin, line)) die("empty input (expected tilelink-bench gemm --csv output)");
  const std::vector<std::string> header = g::detail::split_fields(line, ',');
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  for (const char* need : {"M", "N", "K", "plan"})
    if (!col.count(need)) die(std::string("input has no column '") + need + "'");
  std::printf("%s,model,work,waves,streamed_us,passes,partial_us,fixups,stream_weight,pass_us,partial_weight,"
              "fixup_us,launch_us,k_step_us,wave_us,predicted_us\n",
              line.c_str());

  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    const std::vector<std::string> f = g::detail::split_fields(line, ',');
    if (f.size() != header.size()) die("row with " + std::to_string(f.size()) + " fields: " + line);
    int64_t dims[3];
    for (int i = 0; i < 3; ++i)
      if (!g::detail::whole_integer(f[col[std::string(1, "MNK"[i])]], 1, (int64_t(1) << 31) - 1, &dims[i]))
        die(std::string("row whose ") + "MNK"[i] + " is not an integer in 1..2^31-1: " + line);
    const g::GemmShape s = g::packed({dims[0], dims[1], dims[2]});
    const h::TimeModel model = named ? *named : h::plain_time_model(s.M);
    const g::GemmPlan plan = parse_plan(f[col["plan"]]);
    const h::TimeTerms t = h::time_terms(model, s, plan, sms);
    const h::SharedTimes sh = h::shared_times(model);
    std::printf("%s,%s,%.9g,%.9g,%.9g,%g,%.9g,%g,%g,%g,%g,%g", line.c_str(), kModelNames[int(model)], t.work, t.waves,
                t.streamed_us, t.passes, t.partial_us, t.fixups, sh.stream_weight, sh.pass_us, sh.partial_weight,
                sh.fixup_us);
    if (const auto c = h::config_time(model, plan.config, s.M))
      std::printf(",%g,%g,%g,%.9g\n", c->launch_us, c->k_step_us, c->wave_us, h::predicted_us(t, *c, sh));
    else
      std::printf(",,,,\n");
  }
  return 0;
}
