// fuserun MODEL.onnx: run an ONNX model (original or optimised) on the CUDA
// backend or the CPU reference backend; check it against reference outputs,
// time it, profile it. See --help.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/model_inputs.h"
#include "onnx_io/onnx_io.h"
#include "runtime/backend.h"
#include "runtime/session.h"
#include "tools/fuserun/compare.h"
#include "tools/fuserun/compare_backends.h"
#include "tools/fuserun/generate.h"
#include "tools/fuserun/inputs.h"
#include "tools/fuserun/save_outputs.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::fuserun;

namespace {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double pos = p * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos)), hi = static_cast<size_t>(std::ceil(pos));
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// fuserun --json: nlohmann-json, keys in insertion order (docs/report_schema.md,
// "fuseopt.run/1", and "fuseopt.generate/1" for --generate); a NaN or infinite figure is written as null.
using json = nlohmann::ordered_json;
json json_dims(const std::vector<int64_t>& d) { return json(d); }

struct Options {
  std::string model, backend, precision = "fp32", check_dir, json_file, save_dir;
  std::string kv_cache;  // --kv-cache: hold, copy or auto ("": auto with --generate, copy otherwise)
  std::vector<std::string> shapes;
  double atol = -1, rtol = -1;
  int warmup = -1, iters = -1, threads = 0;
  int device_iters = -1;  // --device-iters: device-latency replays (default: iters)
  uint64_t seed = 1;
  int64_t past = -1;  // --past N (KV-cache decoders)
  int generate = 0;   // --generate N: a decode loop of N steps
  bool profile = false, verbose = false, quiet = false, no_graphs = false, compare_cpu = false, no_validate = false;
};

// True when the model itself is half precision: a float16/bfloat16 graph
// output, input, initializer or Constant. Such a model's reference outputs
// carry half-precision rounding whatever precision it runs at.
bool model_is_half(const Graph& g) {
  auto half = [](DType d) { return d == DType::Float16 || d == DType::BFloat16; };
  for (const Value* v : g.outputs)
    if (half(v->dtype)) return true;
  for (const Value* v : g.inputs)
    if (half(v->dtype)) return true;
  for (const Value* v : g.initializers)
    if (half(v->dtype)) return true;
  for (const auto& n : g.nodes()) {
    if (!n->is("Constant")) continue;
    const Attribute* a = n->attr("value");
    if (a && a->t && half(a->t->dtype)) return true;
  }
  return false;
}

Precision parse_precision(const std::string& s) {
  if (s == "fp32") return Precision::FP32;
  if (s == "tf32") return Precision::TF32;
  if (s == "fp16") return Precision::FP16;
  if (s == "bf16") return Precision::BF16;
  throw Error("--precision " + s + ": expected fp32, tf32, fp16 or bf16");
}

// fuserun --generate N (generate.h): the loop's per-step times, the cache before the first and
// the last step, the last step's outputs; --save-outputs writes that step's inputs and outputs.
int generate_tool(const Options& o, const Graph& g, Session& session, const std::map<std::string, Tensor>& inputs) {
  GenerateResult r = run_generate(session, g, inputs, o.generate, o.kv_cache.empty() ? "auto" : o.kv_cache);
  const std::vector<std::string> out_names = session.output_names();
  if (!o.save_dir.empty()) save_check_dir(o.save_dir, g, r.last_inputs, out_names, r.last_outputs);
  std::vector<double> rest(r.step_ms.begin() + 1, r.step_ms.end());
  const double first = r.step_ms.front(), median = percentile(rest, 0.5);
  std::printf("model: %s\nbackend: %s (%s)\n", o.model.c_str(), backend_name(session.options().backend),
              session.backend().device_name().c_str());
  for (size_t i = 0; i < r.last_outputs.size(); ++i)
    std::printf("output %s (last step): %s %s\n", out_names[i].c_str(), dtype_name(r.last_outputs[i].dtype),
                shape_str(r.last_outputs[i].dims).c_str());
  std::printf("generate: %d steps, cache %lld -> %lld positions; first step %.3f ms", o.generate,
              static_cast<long long>(r.past_first), static_cast<long long>(r.past_last), first);
  if (!rest.empty())
    std::printf(", then per step median %.3f ms, p10 %.3f, p90 %.3f (%.1f steps/s)", median, percentile(rest, 0.1),
                percentile(rest, 0.9), median > 0 ? 1000.0 / median : 0.0);
  std::printf("\n  (a loop: each step has a new shape, so none replays a captured graph; --past P reports one step replayed)\n");
  if (r.held)
    std::printf("kv cache: held by the session from step 2 on (capacity %lld): each step appends its rows in place\n",
                static_cast<long long>(r.capacity));
  else
    std::printf("kv cache: copied (every present a new tensor)%s%s\n", r.not_held.empty() ? "" : ": not held: ",
                r.not_held.c_str());
  if (!o.json_file.empty()) {
    json j;
    j["schema"] = "fuseopt.generate/1";
    j["model"] = o.model;
    j["backend"] = backend_name(session.options().backend);
    j["device"] = session.backend().device_name();
    j["precision"] = precision_name(session.options().precision);
    j["generate"] = {{"steps", o.generate},      {"past_first", r.past_first}, {"past_last", r.past_last},
                     {"step_ms", r.step_ms},    {"first_step_ms", first},
                     {"median_step_ms", rest.empty() ? json(nullptr) : json(median)},
                     {"kv_cache", r.held ? "held" : "copied"}};
    std::ofstream f(o.json_file);
    FUSE_CHECK(f, "--json " << o.json_file << ": cannot write the file");
    f << j.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    FUSE_CHECK(f.good(), "--json " << o.json_file << ": write failed");
  }
  return 0;
}

int run_tool(const Options& o) {
  // Backend: cuda when usable, else the CPU reference with a notice.
  Backend backend;
  if (o.backend.empty()) {
    std::string why;
    if (backend_available(Backend::CUDA, &why)) {
      backend = Backend::CUDA;
    } else {
      backend = Backend::CPU;
      if (!o.quiet) std::fprintf(stderr, "fuserun: no usable GPU (%s); running on the CPU reference backend\n", why.c_str());
    }
  } else if (o.backend == "cuda") {
    backend = Backend::CUDA;
    std::string why;
    FUSE_CHECK(backend_available(Backend::CUDA, &why), "--backend cuda: " << why);
  } else if (o.backend == "cpu") {
    backend = Backend::CPU;
  } else {
    throw Error("--backend " + o.backend + ": expected cuda or cpu");
  }
  const Precision precision = parse_precision(o.precision);
  const double atol = o.atol >= 0 ? o.atol : 0.0;

  auto t_load = std::chrono::steady_clock::now();
  LoadOptions lo;
  lo.validate = !o.no_validate;
  std::unique_ptr<Graph> g = load_model(o.model, lo);
  const bool half_model = model_is_half(*g);
  const double rtol = o.rtol >= 0 ? o.rtol : (precision == Precision::FP32 && !half_model ? 1e-4 : 1e-2);
  spdlog::info("loaded {} ({} nodes, {} inputs, {} outputs)", o.model, g->num_nodes(), g->inputs.size(), g->outputs.size());

  // Inputs.
  std::map<std::string, Tensor> inputs;
  std::vector<Tensor> refs;
  std::vector<std::string> defaulted;  // symbolic dims that took batch/seq defaults
  FUSE_CHECK(o.generate == 0 || o.check_dir.empty(), "--generate cannot be combined with --check (it feeds its own outputs back)");
  if (!o.check_dir.empty()) {
    FUSE_CHECK(o.shapes.empty(), "--shape cannot be combined with --check (the check folder fixes the shapes)");
    FUSE_CHECK(o.past < 0, "--past cannot be combined with --check (the check folder fixes the shapes)");
    CheckData d = read_check_dir(*g, o.check_dir);
    inputs = std::move(d.inputs);
    refs = std::move(d.outputs);
  } else {
    ShapeOverrides ov = parse_shape_flags(*g, o.shapes);
    ov.past = o.past;
    inputs = generate_inputs(*g, resolve_input_shapes(*g, ov, &defaulted), o.seed);
  }
  for (const auto& [n, t] : inputs) spdlog::info("input {} {} {}", n, dtype_name(t.dtype), shape_str(t.dims));

  SessionOptions so;
  so.backend = backend;
  so.precision = precision;
  so.profile = o.profile;
  so.threads = o.threads;
  so.cuda_graphs = !o.no_graphs;
  if (o.compare_cpu) {
    std::printf("model: %s\n", o.model.c_str());
    return compare_with_cpu(*g, inputs, so, rtol, 12) == 0 ? 0 : 1;
  }
  Session session(*g, so);
  if (o.generate > 0) return generate_tool(o, *g, session, inputs);
  double setup_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_load).count();
  spdlog::info("session ready on {} ({}) in {:.1f} ms", backend_name(backend), session.backend().device_name(), setup_ms);

  // Check (one run), then timing.
  std::vector<Tensor> outs;
  try {
    outs = session.run(inputs);
  } catch (const Error& e) {
    if (defaulted.empty()) throw;
    std::string d;
    for (const auto& x : defaulted) d += (d.empty() ? "" : ", ") + x;
    throw Error(std::string(e.what()) + " [defaulted dims: " + d + "; set them with --shape NAME=DIMS]");
  }
  std::vector<std::string> out_names = session.output_names();
  if (!o.save_dir.empty()) save_check_dir(o.save_dir, *g, inputs, out_names, outs);
  // --kv-cache hold / auto: later runs take the cache from the session (Session::hold_kv_cache,
  // capacity = this run's present length), rewound to the given past before each run, so every
  // timed run is the same step over the same cache, appending in place.
  const std::string kv_mode = o.kv_cache.empty() ? "copy" : o.kv_cache;
  FUSE_CHECK(kv_mode == "hold" || kv_mode == "copy" || kv_mode == "auto",
             "--kv-cache " << kv_mode << ": expected hold, copy or auto");
  bool kv_held = false;
  int64_t kv_past = 0;
  std::string kv_why;
  std::map<std::string, Tensor> step_inputs;
  if (kv_mode != "copy") {
    try {
      int64_t capacity = -1;
      for (size_t i = 0; i < g->outputs.size() && capacity < 0; ++i)
        if (cli::is_cache_output(g->outputs[i]) && outs[i].dims.size() == 4) capacity = outs[i].dims[2];
      FUSE_CHECK(capacity > 0, "the model has no present output (named like present.0.key, rank 4)");
      session.hold_kv_cache(capacity);
      step_inputs = inputs;
      for (const std::string& name : session.kv_cache_inputs()) {
        kv_past = inputs.at(name).dims[2];
        step_inputs.erase(name);
      }
      session.run(inputs);  // loads the cache from the given pasts
      kv_held = true;
    } catch (const Error& e) {
      if (kv_mode == "hold") throw Error(std::string("--kv-cache hold: ") + e.what());
      kv_why = e.what();
    }
  }
  auto run_once = [&] {
    if (!kv_held) return session.run(inputs);
    session.set_kv_cache_length(kv_past);
    return session.run(step_inputs);
  };
  std::vector<OutputCheck> checks;
  bool all_pass = true;
  if (!o.check_dir.empty()) {
    for (size_t i = 0; i < outs.size(); ++i) {
      checks.push_back(compare(out_names[i], outs[i], refs[i], atol, rtol));
      const std::string hint = half_range_hint(checks.back(), precision == Precision::FP16);
      if (!hint.empty()) checks.back().note += (checks.back().note.empty() ? "" : "; ") + hint;
      all_pass = all_pass && checks.back().pass;
    }
  }
  const int warmup = o.warmup >= 0 ? o.warmup : (o.check_dir.empty() ? 3 : 0);
  const int iters = o.iters >= 0 ? o.iters : (o.check_dir.empty() ? 10 : 0);
  for (int i = 0; i < warmup; ++i) run_once();
  if (o.profile) session.reset_profile();
  std::vector<double> lat;
  std::vector<Tensor> last;
  for (int i = 0; i < iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    last = run_once();
    lat.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  // Repeated runs may take another path (a captured CUDA graph): check the
  // last one too, so a replay that drifts fails the check.
  if (!o.check_dir.empty() && iters > 0) {
    for (size_t i = 0; i < last.size(); ++i) {
      OutputCheck c = compare(out_names[i] + " (run " + std::to_string(warmup + iters + 1) + ")", last[i], refs[i], atol, rtol);
      if (!c.pass) {
        checks.push_back(c);
        all_pass = false;
      }
    }
  }
  int64_t batch = 1;
  if (!g->inputs.empty()) {
    const Tensor& first = inputs.at(g->inputs[0]->name);
    if (!first.dims.empty()) batch = first.dims[0];
  }
  const double median = percentile(lat, 0.5), p10 = percentile(lat, 0.1), p90 = percentile(lat, 0.9);
  const double throughput = median > 0 ? static_cast<double>(batch) * 1000.0 / median : 0;
  // Device latency: the captured graph replayed with inputs and outputs
  // resident on the GPU (no host copies or host-side dtype conversion), timed
  // with device events -- the figure comparable to PyTorch's, whose tensors
  // stay on the GPU.
  // --device-iters sets their number apart from the host runs: a model with large outputs (an LM
  // head's 4096 x 50257 float logits take ~1 s a host run) times many replays behind few host runs.
  const int device_iters = o.device_iters >= 0 ? o.device_iters : iters;
  std::vector<double> dev_lat;
  for (int i = 0; i < device_iters; ++i) {
    double ms = session.device_replay_ms();
    if (ms < 0) break;
    dev_lat.push_back(ms);
  }
  const double dev_median = dev_lat.empty() ? -1 : percentile(dev_lat, 0.5);
  const double dev_p10 = dev_lat.empty() ? -1 : percentile(dev_lat, 0.1);
  const double dev_p90 = dev_lat.empty() ? -1 : percentile(dev_lat, 0.9);

  // Report.
  std::printf("model: %s\nbackend: %s (%s), precision %s\n", o.model.c_str(), backend_name(backend),
              session.backend().device_name().c_str(), precision_name(precision));
  for (size_t i = 0; i < outs.size(); ++i)
    std::printf("output %s: %s %s\n", out_names[i].c_str(), dtype_name(outs[i].dtype), shape_str(outs[i].dims).c_str());
  if (!checks.empty()) {
    std::printf("check against %s (rtol %g, atol %g; norm-wise relative error ||out-ref||/||ref||):\n",
                o.check_dir.c_str(), rtol, atol);
    for (const OutputCheck& c : checks) {
      std::printf("  %-4s %s: max abs err %.3g, rel err %.3g%s%s\n", c.pass ? "ok" : "FAIL", c.name.c_str(), c.max_abs,
                  c.rel, c.note.empty() ? "" : "  ", c.note.c_str());
    }
    std::printf("check: %s\n", all_pass ? "PASS" : "FAIL");
  }
  if (iters > 0)
    std::printf("latency over %d runs (after %d warmup): median %.3f ms, p10 %.3f ms, p90 %.3f ms; throughput %.1f inferences/s (batch %lld)\n",
                iters, warmup, median, p10, p90, throughput, static_cast<long long>(batch));
  if (dev_median >= 0)
    std::printf("device latency over %zu replays (CUDA graph, I/O resident on the GPU): median %.3f ms, p10 %.3f ms, p90 %.3f ms; throughput %.1f inferences/s\n",
                dev_lat.size(), dev_median, dev_p10, dev_p90, static_cast<double>(batch) * 1000.0 / dev_median);
  if (kv_held)
    std::printf("kv cache: held by the session (%zu past inputs, capacity %lld): each run appends its rows in place\n",
                session.kv_cache_inputs().size(), static_cast<long long>(session.kv_cache_capacity()));
  else if (!kv_why.empty())
    std::printf("kv cache: copied (not held: %s)\n", kv_why.c_str());
  const SessionProfile& prof = session.profile();
  std::printf("memory: peak %.2f MiB of intermediates, %.2f MiB pooled, %.2f MiB constants",
              session.peak_bytes() / 1048576.0, session.reserved_bytes() / 1048576.0,
              session.constant_bytes() / 1048576.0);
  if (session.weights_stored_nk() > 0)
    std::printf(" (%zu GEMM weights stored [N, K]; FUSEOPT_WEIGHT_NK=0 keeps the model's layout)",
                session.weights_stored_nk());
  std::printf("\n");
  if (session.norms_folded() > 0)
    std::printf("norms: %zu RMSNorm steps run by the GatedMatMul that reads them (FUSEOPT_FOLD_NORM=1)\n",
                session.norms_folded());
  if (backend != Backend::CPU) {
    std::printf("graph capture: %s%s\n", prof.capture_possible && prof.capture_disabled_reason.empty() ? "on" : "off",
                prof.capture_disabled_reason.empty() ? "" : (" (" + prof.capture_disabled_reason + ")").c_str());
    if (prof.device_to_host_copies)
      std::printf("device-to-host copies: %lld (%lld bytes)\n", static_cast<long long>(prof.device_to_host_copies),
                  static_cast<long long>(prof.device_to_host_bytes));
  }
  if (o.profile) {
    double total = 0;
    for (const NodeProfile& n : prof.nodes) total += n.total_ms;
    int64_t runs = std::max<int64_t>(1, iters > 0 ? iters : 1);
    std::printf("\nprofile by op type (ms per run, %lld run(s)):\n%-28s %10s %7s %7s\n", static_cast<long long>(runs),
                "op", "ms", "%", "nodes");
    for (const OpProfile& op : prof.by_op_type())
      std::printf("%-28s %10.4f %6.1f%% %7lld\n", op.op.c_str(), op.total_ms / runs,
                  total > 0 ? 100.0 * op.total_ms / total : 0.0, static_cast<long long>(op.nodes));
    std::printf("\nprofile by node (ms per run):\n%-40s %-20s %10s %7s\n", "node", "op", "ms", "%");
    for (const NodeProfile& n : prof.nodes_by_time())
      std::printf("%-40s %-20s %10.4f %6.1f%%%s\n", n.name.c_str(), n.op.c_str(), n.total_ms / runs,
                  total > 0 ? 100.0 * n.total_ms / total : 0.0, n.on_host ? "  (host)" : "");
  }

  if (!o.json_file.empty()) {
    json j;
    j["schema"] = "fuseopt.run/1";
    j["model"] = o.model;
    j["backend"] = backend_name(backend);
    j["device"] = session.backend().device_name();
    j["precision"] = precision_name(precision);
    j["inputs"] = json::object();
    for (const auto& [n, t] : inputs) j["inputs"][n] = {{"dtype", dtype_name(t.dtype)}, {"shape", json_dims(t.dims)}};
    j["outputs"] = json::array();
    for (size_t i = 0; i < outs.size(); ++i)
      j["outputs"].push_back(
          {{"name", out_names[i]}, {"dtype", dtype_name(outs[i].dtype)}, {"shape", json_dims(outs[i].dims)}});
    j["setup_ms"] = setup_ms;
    j["batch"] = batch;
    j["warmup"] = warmup;
    j["iters"] = iters;
    j["device_iters"] = static_cast<int64_t>(dev_lat.size());
    j["latency_ms"] = {{"median", median}, {"p10", p10}, {"p90", p90}, {"all", lat}};
    j["device_latency_ms"] =
        dev_median >= 0 ? json{{"median", dev_median}, {"p10", dev_p10}, {"p90", dev_p90}} : json(nullptr);
    j["throughput_per_s"] = throughput;
    j["kv_cache"] = kv_held ? "held" : "copied";
    j["memory_bytes"] = {{"peak_intermediate", session.peak_bytes()},
                         {"pooled", session.reserved_bytes()},
                         {"constants", session.constant_bytes()},
                         {"weights_stored_nk", session.weights_stored_nk()}};
    j["norms_folded"] = session.norms_folded();
    j["graph_capture"] = {{"possible", prof.capture_possible && prof.capture_disabled_reason.empty()},
                          {"reason", prof.capture_disabled_reason},
                          {"replays", prof.graph_replays}};
    j["device_to_host_copies"] = prof.device_to_host_copies;
    j["device_to_host_bytes"] = prof.device_to_host_bytes;
    if (!checks.empty()) {
      json outs_j = json::array();
      for (const OutputCheck& c : checks)
        outs_j.push_back({{"name", c.name},
                          {"pass", c.pass},
                          {"max_abs_err", c.max_abs},
                          {"rel_err", c.rel},
                          {"nan", c.nan},
                          {"shape", json_dims(c.shape)},
                          {"ref_shape", json_dims(c.ref_shape)},
                          {"note", c.note}});
      j["check"] = {{"dir", o.check_dir}, {"rtol", rtol}, {"atol", atol}, {"pass", all_pass}, {"outputs", outs_j}};
    }
    if (o.profile) {
      int64_t runs = std::max<int64_t>(1, iters > 0 ? iters : 1);
      json by_op = json::array(), by_node = json::array();
      for (const OpProfile& op : prof.by_op_type())
        by_op.push_back({{"op", op.op}, {"ms_per_run", op.total_ms / runs}, {"nodes", op.nodes}});
      for (const NodeProfile& n : prof.nodes_by_time())
        by_node.push_back({{"node", n.name}, {"op", n.op}, {"ms_per_run", n.total_ms / runs}, {"host", n.on_host}});
      j["profile"] = {{"runs", runs}, {"by_op_type", by_op}, {"by_node", by_node}};
    }
    // Names from the model may hold bytes that are not UTF-8: U+FFFD instead of a throw.
    const std::string text = j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
    std::ofstream f(o.json_file);
    FUSE_CHECK(f, "--json " << o.json_file << ": cannot write the file");
    f << text;
    FUSE_CHECK(f.good(), "--json " << o.json_file << ": write failed");
  }
  return all_pass ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "fuserun: run an ONNX model (original or optimised by fuseopt) on the CUDA backend or the CPU reference\n"
      "backend; check it against reference outputs, time it, profile it.\n\n"
      "Tolerances for --check (norm-wise relative error ||out-ref||/||ref|| per output):\n"
      "  fp32: rtol 1e-4;  tf32, fp16, bf16: rtol 1e-2;  atol 0 (off) unless given.\n"
      "  A float16/bfloat16 model (a half output, input, initializer or Constant) defaults to\n"
      "  rtol 1e-2 at every precision: its reference outputs carry half-precision rounding.\n"
      "  An output passes when rel <= rtol or max abs err <= atol; NaN/Inf never passes.\n"
      "  Exit status: 0 ok, 1 check over tolerance, 2 bad input or run-time error.\n\n"
      "Inputs without --check are generated (seeded): token ids below the embedding table size,\n"
      "masks all ones, floats N(0,1). Symbolic dims default to batch 1, sequence 128.\n"
      "The CPU backend runs fp32 (tf32 computes as fp32); --precision fp16/bf16 need the CUDA backend.\n"
      "A float16/bfloat16 model runs on the CPU backend in fp32: its half weights and constants are\n"
      "converted once at load, half inputs on entry, outputs back to the declared dtype, and\n"
      "Cast to FLOAT16/BFLOAT16 inside the graph computes as FLOAT.",
      "fuserun"};
  app.add_option("model", o.model, "the .onnx model")->required();
  app.add_option("--backend", o.backend, "cuda or cpu (default: cuda when a GPU is usable, otherwise cpu)");
  app.add_option("--precision", o.precision, "fp32 (default), tf32, fp16 or bf16");
  app.add_option("--shape", o.shapes, "NAME=DIMS, e.g. input_ids=8x128 or batch=8 (repeatable)")
      ->allow_extra_args(false);  // one value per --shape, so a following positional stays the model
  app.add_option("--past", o.past, "KV-cache decoders: N cached positions in every past_* input (new tokens default "
                                 "to 1, a free attention-mask length to N + new)");
  app.add_option("--generate", o.generate,
                 "KV-cache decoders: a decode loop of N steps, each step's presents fed back as the next step's past "
                 "(kept on the device), the mask grown; prints the per-step time of the loop")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--kv-cache", o.kv_cache,
                 "KV-cache decoders: hold (the session keeps the cache, Session::hold_kv_cache: each run appends its "
                 "new rows in place, no present is copied), copy (every present a new tensor: ONNX's semantics) or "
                 "auto (hold where the model allows it); default auto with --generate, copy otherwise. Timing a held "
                 "step rewinds the cache to --past before every run");
  app.add_option("--check", o.check_dir, "folder with input_N.pb / output_N.pb (ONNX backend-test layout)");
  app.add_option("--save-outputs", o.save_dir,
                 "write this run's inputs and outputs to the folder as input_N.pb / output_N.pb, the layout --check "
                 "reads (another model's reference: fuserun a.onnx --save-outputs ref && fuserun b.onnx --check ref)");
  app.add_option("--atol", o.atol, "absolute tolerance on the max abs error (default 0 = off)");
  app.add_option("--rtol", o.rtol, "norm-wise relative tolerance (default 1e-4 fp32, 1e-2 otherwise or for an fp16/bf16 model)");
  app.add_option("--warmup", o.warmup, "warmup runs before timing (default 3; 0 with --check)");
  app.add_option("--iters", o.iters, "timed runs (default 10; 0 with --check)");
  app.add_option("--device-iters", o.device_iters,
                 "CUDA graph replays timed for the device latency (default: --iters); with large outputs, "
                 "--iters 3 --device-iters 100 times the device without a host copy per replay")
      ->check(CLI::Range(0, 100000000));
  app.add_option("--json", o.json_file, "write every figure to this JSON file");
  app.add_option("--seed", o.seed, "seed for generated inputs (default 1)");
  app.add_option("--threads", o.threads, "CPU threads for kernels (default: all cores)");
  app.add_flag("--profile", o.profile, "time every node; print per-node and per-op-type tables");
  app.add_flag("--compare-cpu", o.compare_cpu,
               "debugging: expose every node output, run once here and once on the CPU reference, list the "
               "node outputs that differ (first in graph order = the likely faulty kernel); exit 1 if any");
  app.add_flag("--no-cuda-graphs", o.no_graphs, "never capture CUDA graphs");
  app.add_flag("--no-validate", o.no_validate,
               "skip the schema validation on load (nodes against their operators' schemas, tensor protos)");
  app.add_flag("-v,--verbose", o.verbose, "log what happens");
  app.add_flag("-q,--quiet", o.quiet, "no notices");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  spdlog::set_default_logger(spdlog::stderr_color_mt("fuserun"));  // logs on stderr, results on stdout
  spdlog::set_pattern("fuserun: %v");
  spdlog::set_level(o.verbose ? spdlog::level::debug : (o.quiet ? spdlog::level::err : spdlog::level::warn));
  if (o.verbose) spdlog::set_level(spdlog::level::info);
  try {
    return run_tool(o);
  } catch (const Error& e) {
    std::fprintf(stderr, "fuserun: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuserun: error: %s\n", e.what());
    return 2;
  }
}
