// fuserun --generate N: a decode loop over a KV-cache decoder, as an application runs one. Each
// step feeds the previous step's present outputs back as the past inputs, grows the attention
// mask by the new tokens (and advances position_ids / cache_position), and times the step from
// the call to its outputs being ready. On a device backend the cache stays on the device
// (Session::run_device: the presents are the next step's device inputs); on the CPU backend
// host tensors go round. Every step has a new input shape (the cache grows), so each one plans
// its shapes afresh and none replays a captured CUDA graph: the figure a generation loop sees,
// next to the single-step replay (device latency) that fuserun --past reports.
// KV cache modes (--kv-cache): "hold" keeps the cache in the session from the second step on
// (Session::hold_kv_cache, capacity = the loop's last length): the first step's presents load
// it once, then each step appends its rows in place and no present is copied or allocated;
// "copy" feeds every present back as a new tensor (ONNX's semantics, what any runtime does);
// "auto" holds where the model's form allows it and says why not otherwise.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "runtime/session.h"

namespace fuseopt::fuserun {

struct GenerateResult {
  std::vector<double> step_ms;              // wall time of each step, first step included
  bool held = false;                        // the session held the cache (from step 2 on)
  int64_t capacity = 0;                     // its capacity when held
  std::string not_held;                     // "auto" that could not hold: why
  int64_t past_first = 0, past_last = 0;    // cached positions before the first and the last step
  std::map<std::string, Tensor> last_inputs;  // the last step's inputs (the cache as it was fed)
  std::vector<Tensor> last_outputs;           // its outputs, in graph order
};

// Runs `steps` steps from `inputs` (one step's inputs, e.g. from --past P). Throws Error when
// the model has no cache inputs, or when its present outputs do not pair with them.
GenerateResult run_generate(Session& session, const Graph& g, std::map<std::string, Tensor> inputs, int steps,
                            const std::string& kv_cache = "auto");

}  // namespace fuseopt::fuserun
