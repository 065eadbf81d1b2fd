// fuseopt IN.onnx OUT.onnx: cleanup and fusion passes, a readable report.
// Exit 0 on success; on any failure exit 1 with ONE line on stderr:
//   fuseopt: error: <reason naming the file/node/op>
// Nothing is written unless everything before it succeeded, and every file is
// written atomically (temporary file + rename), so a failure never leaves a
// partial output behind and never touches the input.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cli/fp16.h"
#include "cli/model_inputs.h"
#include "dot.h"
#include "onnx_io/emit_standard.h"
#include "onnx_io/onnx_io.h"
#include "pass/fusion_report.h"
#include "pass/pass_manager.h"
#include "runtime/session.h"
#include "tools/fuserun/compare.h"
#include "util/error.h"
#include "util/file.h"
#include "util/text.h"

namespace fs = std::filesystem;
using namespace fuseopt;

namespace {

int fail(const std::string& msg) {
  std::fprintf(stderr, "fuseopt: error: %s\n", printable_line(msg).c_str());
  return 1;
}

// Refuses, before any work is done, outputs that could not be written or
// that would overwrite the input.
void check_output_path(const std::string& path, const std::string& input, const char* what) {
  FUSE_CHECK(!path.empty(), what << ": empty path");
  std::error_code ec;
  fs::path out(path);
  if (fs::exists(out, ec)) {
    FUSE_CHECK(!fs::equivalent(fs::path(input), out, ec),
               path << ": " << what << " path is the input file; refusing to overwrite the input");
    FUSE_CHECK(!fs::is_directory(out, ec), path << ": " << what << " path is a folder");
  } else if (fs::absolute(out, ec).lexically_normal() == fs::absolute(fs::path(input), ec).lexically_normal()) {
    throw Error(path + ": " + what + " path is the input file; refusing to overwrite the input");
  }
  fs::path dir = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  FUSE_CHECK(fs::is_directory(dir, ec), path << ": " << what << " folder '" << dir.string() << "' does not exist");
  FUSE_CHECK(::access(dir.c_str(), W_OK) == 0,
             path << ": " << what << " folder '" << dir.string() << "' is not writable");
  // access() says yes to root everywhere: really create (and drop) a temporary file.
  AtomicFile probe(path);
}

size_t spill_min_bytes() {
  const char* e = std::getenv("FUSEOPT_SPILL_MIN_BYTES");
  return e && *e ? static_cast<size_t>(std::strtoull(e, nullptr, 10)) : size_t(1) << 20;
}

// The progress line on stderr for runs that take a while: nothing during the
// first 2 s; then the current step, rewritten in place when stderr is a
// terminal (with the seconds so far), one line per step otherwise. A thread
// of its own prints it, so a long pass still shows.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled), tty_(::isatty(2) == 1) {
    // Tests shorten the 2 s (FUSEOPT_PROGRESS_AFTER_S=0 shows every step).
    if (const char* e = std::getenv("FUSEOPT_PROGRESS_AFTER_S")) after_s_ = std::atof(e);
    if (enabled_) thread_ = std::thread([this] { loop(); });
  }
  ~Progress() { finish(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  void set(std::string text) {
    if (!enabled_) return;
    std::lock_guard<std::mutex> lock(m_);
    text_ = std::move(text);
    ++version_;
    // Once past the delay every step shows at once (off a terminal: a line of its own).
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    if (s >= after_s_) print(s);
  }
  // Stops the thread and clears an in-place line (before any other output).
  void finish() {
    if (!enabled_) return;
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
    if (tty_ && shown_) std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    enabled_ = false;
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(m_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(200));
      if (stop_) break;
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
      if (s < after_s_ || text_.empty()) continue;
      if (tty_ || version_ != printed_) print(s);
    }
  }
  void print(double seconds) {  // m_ held
    if (text_.empty()) return;
    if (tty_) {
      std::fprintf(stderr, "\rfuseopt: %s (%.0f s)\033[K", text_.c_str(), seconds);
    } else {
      if (printed_ == version_) return;
      std::fprintf(stderr, "fuseopt: %s\n", text_.c_str());
    }
    std::fflush(stderr);
    printed_ = version_;
    shown_ = true;
  }
  bool enabled_, tty_, stop_ = false, shown_ = false;
  double after_s_ = 2.0;
  std::string text_;
  uint64_t version_ = 0, printed_ = 0;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  std::mutex m_;
  std::condition_variable cv_;
  std::thread thread_;
};

// --check [N]: a count of random inputs, 1 or more.
int parse_check_count(const std::string& s) {
  FUSE_CHECK(!s.empty() && s.size() <= 6 && s.find_first_not_of("0123456789") == std::string::npos && std::stoi(s) >= 1,
             "--check " << s << ": expected the number of random inputs to compare on (1 or more; --check alone is 3)");
  return std::stoi(s);
}

// A generated input in the dtype the optimized model declares (float16 after --fp16).
Tensor as_dtype(const Tensor& t, DType to) {
  if (to == DType::Undefined || to == t.dtype || !dtype_is_float(t.dtype) || !dtype_is_float(to)) return t;
  Tensor r(to, t.dims);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float x = static_cast<float>(t.as_double(i));
    switch (to) {
      case DType::Float: r.data<float>()[i] = x; break;
      case DType::Double: r.data<double>()[i] = x; break;
      case DType::Float16: r.data<uint16_t>()[i] = float_to_half(x); break;
      default: r.data<uint16_t>()[i] = float_to_bf16(x); break;
    }
  }
  return r;
}

bool is_half(DType d) { return d == DType::Float16 || d == DType::BFloat16; }

// --check: the optimized graph against the original (loaded afresh, same
// --input-shape) on `count` seeded random inputs, both on the CPU backend.
// Returns the largest relative error; throws Error naming the first output
// over tolerance.
double check_against_original(const Graph& opt, const std::string& in_path, const LoadOptions& load_options,
                              const std::vector<std::string>& shape_flags, int count, bool fp16, Progress& progress) {
  auto ref = load_model(in_path, load_options);
  cli::ShapeOverrides ov;
  if (!shape_flags.empty()) {
    ov = cli::parse_shape_flags(*ref, shape_flags, "--input-shape");
    cli::specialize_input_shapes(*ref, ov);
  }
  bool half = fp16;
  for (const Value* v : ref->inputs) half = half || is_half(v->dtype);
  for (const Value* v : ref->outputs) half = half || is_half(v->dtype);
  const double rtol = half ? 1e-2 : 1e-4;  // DESIGN.md numerics
  std::vector<std::string> defaulted;
  const auto shapes = cli::resolve_input_shapes(*ref, ov, &defaulted);
  SessionOptions so;
  so.backend = Backend::CPU;
  std::unique_ptr<Session> s_ref, s_opt;
  try {
    s_ref = std::make_unique<Session>(*ref, so);
  } catch (const Error& e) {
    throw Error(std::string("--check: the original model does not run on the CPU backend: ") + e.what());
  }
  try {
    s_opt = std::make_unique<Session>(opt, so);
  } catch (const Error& e) {
    throw Error(std::string("--check: the optimized model does not run on the CPU backend: ") + e.what());
  }
  std::map<std::string, DType> opt_dtypes;
  for (const Value* v : opt.inputs) opt_dtypes[v->name] = v->dtype;
  const std::vector<std::string> names = s_opt->output_names();
  double worst = 0;
  for (int k = 1; k <= count; ++k) {
    auto inputs = cli::generate_inputs(*ref, shapes, static_cast<uint64_t>(k));
    progress.set("check " + std::to_string(k) + "/" + std::to_string(count) + ": original");
    std::vector<Tensor> want, got;
    try {
      want = s_ref->run(inputs);
    } catch (const Error& e) {
      std::string d;
      for (const auto& x : defaulted) d += (d.empty() ? "" : ", ") + x;
      throw Error(std::string("--check: the original model failed on random input ") + std::to_string(k) + ": " +
                  e.what() + (d.empty() ? "" : " [defaulted dims: " + d + "; set them with --input-shape NAME=DIMS]"));
    }
    for (auto& [n, t] : inputs)
      if (opt_dtypes.count(n)) t = as_dtype(t, opt_dtypes[n]);
    progress.set("check " + std::to_string(k) + "/" + std::to_string(count) + ": optimized");
    try {
      got = s_opt->run(inputs);
    } catch (const Error& e) {
      throw Error(std::string("--check: the optimized model failed on random input ") + std::to_string(k) + ": " +
                  e.what());
    }
    FUSE_CHECK(got.size() == want.size(), "--check: the optimized model has " << got.size() << " outputs, the original "
                                                                              << want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      fuserun::OutputCheck c = fuserun::compare(names[i], got[i], want[i], 0.0, rtol);
      if (!c.pass) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "rel err %.3g > %.0e (max abs err %.3g)", c.rel, rtol, c.max_abs);
        throw Error("--check: output '" + names[i] + "' differs from the original on random input " +
                    std::to_string(k) + " (seed " + std::to_string(k) + "): " + (c.shape_ok ? buf : "") +
                    (c.note.empty() ? "" : std::string(c.shape_ok ? "; " : "") + c.note) +
                    "; the output file was not written");
      }
      worst = std::max(worst, c.rel);
    }
  }
  return worst;
}

void list_passes() {
  std::printf("%-8s %-6s %-22s %s\n", "category", "order", "name", "description");
  for (const PassInfo* p : registered_passes())
    std::printf("%-8s %-6d %-22s %s\n", category_name(p->category), p->order, p->name.c_str(),
                p->description.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fuseopt: rewrite an ONNX model so that chains of small operators become fused operators"};
  std::string in_path, out_path, report_path, dot_path, passes, disable, emit = "fuseopt";
  bool list = false, quiet = false, approximate_gelu = false, external_data = false, no_validate = false;
  int verbose = 0, max_iterations = 10;
  app.add_option("input", in_path, "input .onnx model");
  app.add_option("output", out_path, "output .onnx model (never the input)");
  app.add_option("--report", report_path, "write the fusion report as JSON to this file");
  app.add_option("--passes", passes, "comma-separated passes to run (names, 'cleanup', 'fusion', or 'none')");
  app.add_option("--disable", disable, "comma-separated passes not to run");
  app.add_flag("--list-passes", list, "list the registered passes and exit");
  app.add_option("--dot", dot_path, "write the optimized graph as Graphviz DOT to this file");
  app.add_flag("-v,--verbose", verbose, "more detail (-vv: every match attempt)");
  app.add_flag("-q,--quiet", quiet, "print nothing but errors");
  app.add_flag("--approximate-gelu", approximate_gelu, "allow erf GELU to become the tanh approximation");
  app.add_flag("--external-data", external_data,
               "write weights of 1 KiB or more to the side file OUT.onnx.data (default: only when the input had "
               "external data or the weights exceed 1.8 GiB)");
  app.add_option("--emit", emit,
                 "output form: 'fuseopt' (fused ops with function bodies, default) or 'standard' (standard ONNX "
                 "ops where exact: Attention, RMSNormalization, RotaryEmbedding at opset 23, LayerNormalization)");
  app.add_option("--max-iterations", max_iterations, "cap on cleanup+fusion iterations (default 10)");
  app.add_flag("--no-validate", no_validate,
               "skip the schema validation on load (every node against its operator's schema at the model's opset, "
               "every tensor proto well-formed); a model it would refuse may then fail later or be written invalid");
  std::vector<std::string> input_shapes;
  std::string check_arg;
  bool fp16 = false, keep_io_types = false;
  app.add_option("--input-shape", input_shapes,
                 "NAME=DIMS: specialise an input's shape (input_ids=1x128) or a symbolic dim (batch=1) before "
                 "optimizing (repeatable)")
      ->allow_extra_args(false);  // one value each, so a following positional stays a positional
  auto* check_opt = app.add_option("--check", check_arg,
                                   "compare the optimized model with the original on N seeded random inputs (CPU "
                                   "backend; default 3); on a mismatch fail and write nothing")
                        ->expected(0, 1);
  app.add_flag("--fp16", fp16,
               "write a float16 model (norm statistics, softmax and reductions stay fp32; shape parameters "
               "such as Resize scales stay fp32)");
  app.add_flag("--keep-io-types", keep_io_types, "with --fp16: keep float graph inputs/outputs fp32 (Casts at the boundary)");
  // A bare --check before a positional (`fuseopt --check in.onnx out.onnx`)
  // must not take the model path as its count: --check followed by nothing,
  // an option or a .onnx path is --check=3.
  std::vector<std::string> arg_store(argv, argv + argc);
  for (size_t i = 1; i < arg_store.size(); ++i) {
    if (arg_store[i] != "--check") continue;
    const std::string next = i + 1 < arg_store.size() ? arg_store[i + 1] : "";
    const bool path = next.size() >= 5 && next.compare(next.size() - 5, 5, ".onnx") == 0;
    if (next.empty() || next[0] == '-' || path) arg_store[i] = "--check=3";
  }
  std::vector<char*> args;
  for (auto& a : arg_store) args.push_back(a.data());
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "fuseopt: error: %s (see fuseopt --help)\n", printable_line(e.what()).c_str());
    return 2;
  }

  auto log = spdlog::stderr_color_mt("fuseopt");
  spdlog::set_default_logger(log);
  spdlog::set_pattern("fuseopt: %l: %v");
  spdlog::set_level(quiet ? spdlog::level::err
                          : verbose >= 2 ? spdlog::level::trace
                                         : verbose == 1 ? spdlog::level::debug : spdlog::level::warn);

  try {
    if (list) {
      list_passes();
      return 0;
    }
    if (in_path.empty() || out_path.empty())
      return fail("expected two arguments: IN.onnx OUT.onnx (see fuseopt --help)");
    PassManagerOptions pmo;
    pmo.only = split_pass_list(passes);
    if (!passes.empty() && pmo.only.empty()) pmo.only = {"none"};
    pmo.disabled = split_pass_list(disable);
    pmo.max_iterations = max_iterations;
    pmo.check_shapes = !no_validate;
    FUSE_CHECK(max_iterations >= 1, "--max-iterations must be at least 1");
    pmo.pass_options.approximate_gelu = approximate_gelu;
    pmo.pass_options.verbose = verbose;
    PassManager pm(pmo);  // unknown pass names fail here, before any I/O
    EmitOptions eo;
    eo.mode = parse_emit_mode(emit);  // a bad value fails here too

    const int check_count = check_opt->count() == 0 ? 0 : check_arg.empty() ? 3 : parse_check_count(check_arg);
    FUSE_CHECK(!keep_io_types || fp16, "--keep-io-types only applies with --fp16");

    check_output_path(out_path, in_path, "output");
    if (!report_path.empty()) check_output_path(report_path, in_path, "report");
    if (!dot_path.empty()) check_output_path(dot_path, in_path, "dot");

    Progress progress(!quiet);
    progress.set("loading " + in_path);
    LoadOptions lo;
    lo.validate = !no_validate;
    auto g = load_model(in_path, lo);
    // New constants of 1 MiB or more (packed, folded, converted weights) wait in
    // a scratch file in the output's folder, not in memory, until save_model
    // copies them into the side file (docs/big_models.md). The output's bytes are
    // the same either way; FUSEOPT_SPILL_MIN_BYTES sets the size (tests use 0).
    g->spill_constants_to(fs::path(out_path).parent_path().string(), spill_min_bytes());
    if (!input_shapes.empty())  // bad names and impossible shapes fail here, before any pass
      cli::specialize_input_shapes(*g, cli::parse_shape_flags(*g, input_shapes, "--input-shape"));
    FusionReport report;
    report.set_model(in_path, out_path);
    {
      // "pass 3/12 Attention": the pass that runs now (the one after the last reported).
      const auto& ps = pm.passes();
      const size_t n = ps.size();
      auto label = [&ps, n](size_t i, int iteration) {
        return "pass " + std::to_string(i + 1) + "/" + std::to_string(n) + " " + ps[i]->name() + " (iteration " +
               std::to_string(iteration) + ")";
      };
      if (n > 0) progress.set(label(0, 1));
      report.set_pass_observer([&progress, &ps, n, label, iteration = 1, i = size_t(0)](const std::string& name) mutable {
        for (size_t k = 0; k < n; ++k)
          if (ps[k]->name() == name) i = k;
        if (++i == n) i = 0, ++iteration;
        progress.set(label(i, iteration));
      });
    }
    std::map<std::string, FusedOrigin> origins;
    try {
      origins = pm.run(*g, report);
      report.set_pass_observer(nullptr);
      progress.set("writing the output form");
      apply_emit(*g, eo, &report);
    } catch (const Error& e) {
      throw Error(in_path + ": " + e.what());
    }
    if (fp16) {
      progress.set("converting to fp16");
      try {
        cli::Fp16Options fo;
        fo.keep_io_types = keep_io_types;
        cli::convert_to_fp16(*g, fo);
      } catch (const Error& e) {
        throw Error(in_path + ": " + e.what());
      }
    }
    double check_err = -1;
    if (check_count > 0) check_err = check_against_original(*g, in_path, lo, input_shapes, check_count, fp16, progress);

    // Everything is computed before anything is written.
    std::string json = report_path.empty() ? std::string() : report.to_json();
    std::string dot = dot_path.empty() ? std::string() : graph_to_dot(*g, origins);
    SaveOptions so;
    so.input_path = in_path;
    if (external_data) so.external = SaveOptions::External::Always;
    progress.set("saving " + out_path);
    try {
      save_model(*g, out_path, so);
    } catch (const Error& e) {
      // Writing the fused ops' function bodies can refuse a node: name the model it came from.
      const std::string m = e.what();
      if (m.rfind(out_path, 0) == 0 || m.rfind(in_path, 0) == 0) throw;
      throw Error(in_path + ": " + m);
    }
    if (!report_path.empty()) {
      AtomicFile f(report_path);
      f.write(json);
      f.commit();
    }
    if (!dot_path.empty()) {
      AtomicFile f(dot_path);
      f.write(dot);
      f.commit();
    }
    progress.finish();
    if (!quiet) {
      std::cout << report.to_table(verbose > 0);
      if (check_count > 0)
        std::printf("\ncheck: %d random input%s on the CPU backend, largest norm-wise relative error %.3g: ok\n",
                    check_count, check_count == 1 ? "" : "s", check_err);
      std::cout << std::flush;
    }
    return 0;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}
