// fuserun --generate (see generate.h).
#include "tools/fuserun/generate.h"

#include <chrono>
#include <cstring>
#include <memory>

#include "cli/model_inputs.h"
#include "util/error.h"

namespace fuseopt::fuserun {
namespace {

// The cache pairs: past inputs with present outputs (cli::is_cache_input / is_cache_output, the
// names --past goes by), in graph order. The two lists must pair one to one.
struct CachePair {
  std::string past;
  size_t present = 0;  // graph output index
};

std::vector<CachePair> cache_pairs(const Graph& g) {
  std::vector<std::string> pasts;
  for (const Value* v : g.inputs)
    if (cli::is_cache_input(v)) pasts.push_back(v->name);
  std::vector<size_t> presents;
  for (size_t i = 0; i < g.outputs.size(); ++i)
    if (cli::is_cache_output(g.outputs[i])) presents.push_back(i);
  FUSE_CHECK(!pasts.empty(), "--generate: the model has no cache input (an input named like past_key_values.0.key, rank >= 3)");
  FUSE_CHECK(pasts.size() == presents.size(), "--generate: " << pasts.size() << " cache inputs but " << presents.size()
                                                             << " present outputs: cannot feed the presents back");
  std::vector<CachePair> r;
  for (size_t i = 0; i < pasts.size(); ++i) r.push_back({pasts[i], presents[i]});
  return r;
}

// A step's new inputs from the last ones: the mask one column of ones longer per new token,
// position_ids / cache_position moved on by the new tokens. Other inputs stay.
void advance(const Graph& g, std::map<std::string, Tensor>& in, int64_t fresh) {
  for (const Value* v : g.inputs) {
    Tensor& t = in.at(v->name);
    if (cli::is_cache_input(v)) continue;
    if (cli::is_mask_input(v)) {
      Tensor m(t.dtype, {t.dims[0], t.dims[1] + fresh});
      const size_t es = dtype_size(t.dtype), row = size_t(t.dims[1]) * es, nrow = size_t(m.dims[1]) * es;
      for (int64_t b = 0; b < t.dims[0]; ++b) {
        std::memcpy(m.bytes.data() + b * nrow, t.bytes.data() + b * row, row);
        for (int64_t j = t.dims[1]; j < m.dims[1]; ++j) {  // a one of the mask's type
          uint8_t* p = m.bytes.data() + b * nrow + size_t(j) * es;
          switch (t.dtype) {
            case DType::Int64: *reinterpret_cast<int64_t*>(p) = 1; break;
            case DType::Int32: *reinterpret_cast<int32_t*>(p) = 1; break;
            case DType::Bool: *p = 1; break;
            case DType::Float: *reinterpret_cast<float*>(p) = 1.f; break;
            default: throw Error("--generate: mask '" + v->name + "' of type " + dtype_name(t.dtype) + " cannot grow");
          }
        }
      }
      t = std::move(m);
    } else if ((v->name == "position_ids" || v->name == "cache_position") &&
               (t.dtype == DType::Int64 || t.dtype == DType::Int32)) {
      for (int64_t i = 0; i < t.numel(); ++i) {
        if (t.dtype == DType::Int64) t.data<int64_t>()[i] += fresh;
        else t.data<int32_t>()[i] += static_cast<int32_t>(fresh);
      }
    }
  }
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

GenerateResult run_generate(Session& session, const Graph& g, std::map<std::string, Tensor> inputs, int steps,
                            const std::string& kv_cache) {
  FUSE_CHECK(steps >= 1, "--generate: the number of steps must be at least 1");
  FUSE_CHECK(kv_cache == "auto" || kv_cache == "hold" || kv_cache == "copy",
             "--kv-cache " << kv_cache << ": expected auto, hold or copy");
  const std::vector<CachePair> pairs = cache_pairs(g);
  const std::string& first_past = pairs[0].past;
  const size_t seq_axis = inputs.at(first_past).dims.size() - 2;
  GenerateResult r;
  r.past_first = inputs.at(first_past).dims[seq_axis];
  const bool device = session.options().backend != Backend::CPU;
  std::vector<DeviceTensor> dev_cache;  // the last step's presents (device backends)
  std::vector<DeviceTensor> dev_outs, fed;  // fed: the cache the current step reads
  std::map<std::string, Tensor> host_fed;   // the same on the CPU backend (held: the pasts are not inputs)
  for (int s = 0; s < steps; ++s) {
    // Step 2 on: the cache held by the session, loaded once from step 1's presents (passed as
    // this step's pasts); later steps pass no pasts.
    if (s == 1 && kv_cache != "copy") {
      const int64_t now = device ? dev_cache[0].shape[seq_axis] : r.last_outputs[pairs[0].present].dims[seq_axis];
      const int64_t capacity = now + (now - r.past_first) * (steps - 1);
      try {
        session.hold_kv_cache(capacity);
        FUSE_CHECK(session.kv_cache_inputs().size() == pairs.size(),
                   "the session holds " << session.kv_cache_inputs().size() << " of the " << pairs.size()
                                        << " cache inputs");
        r.held = true;
        r.capacity = capacity;
      } catch (const Error& e) {
        if (kv_cache == "hold") throw Error(std::string("--kv-cache hold: ") + e.what());
        r.not_held = e.what();
      }
    }
    const bool pass_pasts = !r.held || s == 1;
    fed = dev_cache;
    if (!device && s > 0)
      for (const CachePair& p : pairs) host_fed[p.past] = r.last_outputs[p.present];
    r.past_last = device && !dev_cache.empty() ? dev_cache[0].shape[seq_axis] : inputs.at(first_past).dims[seq_axis];
    if (!device && s > 0) r.past_last = host_fed.at(first_past).dims[seq_axis];
    const auto t0 = std::chrono::steady_clock::now();
    if (device) {
      // Host views of the small inputs, device views of the cache (the previous presents).
      std::map<std::string, RtTensor> views;
      for (const auto& [name, t] : inputs)
        views[name] = RtTensor{t.dtype, t.dims, const_cast<uint8_t*>(t.bytes.data()), Backend::CPU};
      for (size_t i = 0; i < dev_cache.size(); ++i) {
        const DeviceTensor& d = dev_cache[i];
        if (pass_pasts) views[pairs[i].past] = RtTensor{d.dtype, d.shape, d.data, session.options().backend};
        else views.erase(pairs[i].past);
      }
      dev_outs = session.run_device(views);  // synchronized: the outputs are complete
      r.step_ms.push_back(ms_since(t0));
      dev_cache.clear();
      for (const CachePair& p : pairs) dev_cache.push_back(dev_outs[p.present]);
    } else {
      std::map<std::string, Tensor> step_inputs = inputs;
      for (const CachePair& p : pairs) {
        if (!pass_pasts) step_inputs.erase(p.past);
        else if (s > 0) step_inputs[p.past] = host_fed.at(p.past);
      }
      r.last_outputs = session.run(step_inputs);
      r.step_ms.push_back(ms_since(t0));
    }
    if (s + 1 == steps) break;
    const int64_t now = device ? dev_cache[0].shape[seq_axis] : r.last_outputs[pairs[0].present].dims[seq_axis];
    const int64_t fresh = now - r.past_last;
    FUSE_CHECK(fresh >= 1, "--generate: present '" << g.outputs[pairs[0].present]->name << "' has " << now
                                                  << " positions after a step over " << r.past_last
                                                  << ": it is not the past grown by the new tokens");
    advance(g, inputs, fresh);
  }
  // The last step's inputs and outputs on the host (the report, --save-outputs).
  r.last_inputs = inputs;
  if (device) {
    // The cache the last step read: the presents of the step before it (with one step, the
    // generated inputs, already in `inputs`). Held, those are views of the cache at the length
    // it had then: its rows before that length are unchanged (the cache only grows).
    for (size_t i = 0; i < fed.size(); ++i) r.last_inputs[pairs[i].past] = session.download(fed[i]);
    r.last_outputs.clear();
    for (const DeviceTensor& d : dev_outs) r.last_outputs.push_back(session.download(d));
  } else {
    for (const auto& [name, t] : host_fed) r.last_inputs[name] = t;
  }
  return r;
}

}  // namespace fuseopt::fuserun
