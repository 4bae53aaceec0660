// GemmPlan <-> text (tilelink/gemm/plan_text.hpp).
#include "tilelink/gemm/plan_text.hpp"

#include <vector>

#include "text_fields.hpp"

namespace tilelink::gemm {
namespace {

bool fail(std::string* why, const std::string& text, const std::string& reason) {
  if (why) *why = "plan '" + text + "': " + reason;
  return false;
}

}  // namespace

std::string plan_text(const GemmPlan& p) {
  std::string t = std::string(config_name(p.config)) + "/" + raster_name(p.raster) + "/sw" + std::to_string(p.swizzle);
  switch (p.decomposition) {
    case Decomposition::split_k: return t + "/split" + std::to_string(p.splits);
    case Decomposition::split_k_reduce: return t + "/reduce" + std::to_string(p.splits);
    case Decomposition::stream_k: return t + "/streamk";
    default: return t;
  }
}

bool parse_plan(const std::string& text, GemmPlan* out, std::string* why) {
  const std::vector<std::string> parts = detail::split_fields(text, '/');
  if (parts.size() < 3 || parts.size() > 4) return fail(why, text, "want config/raster/swN[/division]");
  GemmPlan p;
  if (!parse_config(parts[0], &p.config))
    return fail(why, text, "unknown config '" + parts[0] + "' (not in this build)");
  if (parts[1] == "along_m") {
    p.raster = Raster::along_m;
  } else if (parts[1] == "along_n") {
    p.raster = Raster::along_n;
  } else if (parts[1] == "heuristic") {
    p.raster = Raster::heuristic;
  } else {
    return fail(why, text, "raster '" + parts[1] + "' is not along_m, along_n or heuristic");
  }
  int64_t swizzle = 0;
  if (parts[2].rfind("sw", 0) != 0 || !detail::whole_integer(parts[2].substr(2), 1, 8, &swizzle) ||
      (swizzle & (swizzle - 1)) != 0)
    return fail(why, text, "swizzle '" + parts[2] + "' is not sw1, sw2, sw4 or sw8");
  p.swizzle = int(swizzle);
  if (parts.size() == 4) {
    const std::string& d = parts[3];
    int64_t splits = 1;
    const auto slices = [&](size_t prefix) { return detail::whole_integer(d.substr(prefix), 2, kMaxSplits, &splits); };
    if (d.rfind("split", 0) == 0 && slices(5)) {
      p.decomposition = Decomposition::split_k;
    } else if (d.rfind("reduce", 0) == 0 && slices(6)) {
      p.decomposition = Decomposition::split_k_reduce;
    } else if (d == "streamk") {
      p.decomposition = Decomposition::stream_k;
    } else {
      return fail(why, text,
                  "division '" + d + "' is not splitS, reduceS (S = 2.." + std::to_string(kMaxSplits) + ") or streamk");
    }
    p.splits = int(splits);
  }
  *out = p;
  return true;
}

}  // namespace tilelink::gemm
