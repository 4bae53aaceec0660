// Plain-GEMM tuning: the rule's best few plans for a shape timed on the device, the fastest kept.
//
// The rule (choose_config) predicts each config's time from a fitted model; on a random shape its
// first pick is within a few percent of the fastest config most of the time but not always
// (docs/GEMM.md, "Tuning"). Tuning times the rule's first few plans, and their configs' other
// work divisions, on the caller's operands once per shape and keeps the fastest, as PyTorch's
// TunableOp does for cuBLASLt's candidates:
//
//   tilelink::gemm::set_plain_gemm_tuning(true);   // or TILELINK_GEMM_TUNE=1 in the environment
//   tilelink::gemm::gemm(DType::bf16, A, B, D, shape, /*plan=*/nullptr, 0, stream);  // tunes once
//
// A tuning call blocks the host until its timings are done; under CUDA graph capture nothing is
// timed (a shape tuned before capture keeps its tuned plan, any other gets the rule's).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tilelink/core/dtype.hpp"
#include "tilelink/gemm/gemm.hpp"

namespace tilelink::gemm {

// The rule's ranking of the allowed configs it considers for the shape, each as choose_config
// would run it were it the only one allowed (its division and tile order): choose_config's pick
// first, then the others by predicted time where the rule has a time model for the shape, else
// by score. Pure given sm_budget > 0.
std::vector<GemmPlan> ranked_plans(const GemmShape& shape, int sm_budget, uint64_t allowed = kLibConfigMask,
                                   PlanUse use = PlanUse::fused_op);

struct GemmTuning {
  int candidates = 5;     // the rule's first configs timed (its pick among them)
  int samples = 7;        // timed blocks of launches per plan, interleaved; the median decides
  bool divisions = true;  // each of those configs at its other work divisions too (from 64 rows)
};

// What tune_plain_gemm times for the shape, the rule's order first: its first
// `tuning.candidates` plain plans, then (with `tuning.divisions`, at 64 rows or more) each of
// those configs at the other divisions it can run — whole K, K in 2-4 slices with a separate
// sum, and on the stream-K scheduler 2 chained slices and stream-K — in the rule's tile order.
// The rule's time model ranks configs at one division each and errs most where a split of K
// wins (narrow N, thousands of rows, deep K); timing the divisions lets tuning find those.
// Each plan once. Pure given sm_budget > 0.
std::vector<GemmPlan> tuning_plans(const GemmShape& shape, int sm_budget, const GemmTuning& tuning = {});

// What tuning measured for one shape: the plans timed (tuning_plans' order) and the median
// microseconds per launch of each; `best` indexes the fastest. Each plan's launches are timed
// in blocks captured as CUDA graphs, so that the host's cost per call (as long as a small GEMM's
// kernel) is not what is timed; `from_graphs` is false where the driver refused the capture and
// the blocks were launched call by call instead.
struct GemmTuneResult {
  std::vector<GemmPlan> plans;
  std::vector<double> us;
  int best = 0;
  bool from_graphs = false;
};

// Times tuning_plans(shape, sm_budget, tuning) on `stream` with the caller's operands — D is
// written, its contents afterwards are the last launch's — and returns what it measured. A plan
// later in that order is kept only when more than 1% faster. Blocks until done; throws
// tilelink::Error under graph capture, on bad operands or a failed launch.
GemmTuneResult tune_plain_gemm(DType dtype, const void* A, const void* B, void* D, const GemmShape& shape,
                               int sm_budget, cudaStream_t stream, const GemmTuning& tuning = {});

// Whether gemm(..., plan = nullptr, ...) tunes: off unless TILELINK_GEMM_TUNE=1 is set, or
// set_plain_gemm_tuning(true). Tuned plans are kept per (device, dtype, shape and leading
// dimensions, SM budget) for the life of the process; clear_tuned_plans() forgets them (and
// TILELINK_GEMM_TUNE_FILE is read again at the next tuning call).
void set_plain_gemm_tuning(bool on);
bool plain_gemm_tuning();
void clear_tuned_plans();
// How many shapes have a tuned plan (for tests and tools).
size_t tuned_plan_count();

// Tuned plans on disk, so that the ranks of a job and later runs share one tuning. A file holds
// one CSV line per tuned shape (lines starting with '#' are comments):
//
//   gpu,dtype,M,N,K,lda,ldb,ldd,sms,plan,us
//   NVIDIA H200:132,bf16,1000,1376,2048,2048,2048,1376,132,pp_128x128_c2x2/along_n/sw1,41.28
//
// `gpu` is the device's name and SM count: lines tuned on another GPU model are not taken. A line
// is taken only where its plan (tilelink/gemm/plan_text.hpp) is one tuning may still time for
// the shape (a config the rule ranks, at a division tuning tries), so a file written by another
// build never runs a plan this one would not; such shapes are tuned again. `us` is what tuning
// measured (for the reader; not used).
//
// TILELINK_GEMM_TUNE_FILE=<path>, with tuning on: gemm() reads the file (if it exists) before
// its first tuned call and appends a line for each shape it tunes — one write per line, so
// the processes of a job may share one file on a local file system.
//
// load_tuned_plans: the lines taken for this process's GPUs (a shape already tuned keeps its
// plan); throws tilelink::Error naming the file and line on an unreadable file or a malformed
// line. save_tuned_plans: writes every tuned plan (replacing the file); returns the lines written.
size_t load_tuned_plans(const std::string& path);
size_t save_tuned_plans(const std::string& path);

namespace detail {
// What TILELINK_GEMM_TUNE's text asks for: unset or empty -> off, "0" -> off, "1" -> on; anything
// else throws tilelink::Error naming the variable.
bool tuning_requested(const char* env_text);
// One line of a tuned-plans file.
struct TunedLine {
  std::string gpu;  // gpu_model_name(): the device's name and SM count
  DType dtype = DType::bf16;
  GemmShape shape;
  int sms = 0;
  GemmPlan plan;
  double us = 0.0;
};
std::string tuned_line_text(const TunedLine& line);
// Parses tuned_line_text's form. A malformed line returns false with the reason in *why; a
// well-formed line whose plan names a config this build lacks returns true with *known = false.
bool parse_tuned_line(const std::string& text, TunedLine* out, bool* known, std::string* why);
// "<name>:<SM count>" of a device, commas in the name made spaces.
std::string gpu_model_name(int device);
// The plan gemm() runs when the caller gives none: the tuned one when tuning is on (tuning the
// shape first if it is new and the stream is not capturing), else the rule's.
GemmPlan plain_call_plan(DType dtype, const void* A, const void* B, void* D, const GemmShape& shape, int sm_budget,
                         cudaStream_t stream);
}  // namespace detail

}  // namespace tilelink::gemm
