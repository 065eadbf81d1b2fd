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
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include "dot.h"
#include "onnx_io/emit_standard.h"
#include "onnx_io/onnx_io.h"
#include "pass/fusion_report.h"
#include "pass/pass_manager.h"
#include "util/error.h"
#include "util/file.h"

namespace fs = std::filesystem;
using namespace fuseopt;

namespace {

// One printable line: control characters become spaces and bytes that are not
// valid UTF-8 (names in a corrupted file) become '?'.
std::string one_line(const std::string& in) {
  std::string s;
  for (size_t i = 0; i < in.size();) {
    unsigned char c = static_cast<unsigned char>(in[i]);
    if (c < 0x20 || c == 0x7f) {
      s += ' ';
      ++i;
      continue;
    }
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool ok = len > 0 && i + len <= in.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(in[i + k]) & 0xc0) == 0x80;
    if (!ok) {
      s += '?';
      ++i;
      continue;
    }
    s.append(in, i, len);
    i += len;
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

int fail(const std::string& msg) {
  std::fprintf(stderr, "fuseopt: error: %s\n", one_line(msg).c_str());
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
  bool list = false, quiet = false, approximate_gelu = false, external_data = false;
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "fuseopt: error: %s (see fuseopt --help)\n", one_line(e.what()).c_str());
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
    FUSE_CHECK(max_iterations >= 1, "--max-iterations must be at least 1");
    pmo.pass_options.approximate_gelu = approximate_gelu;
    pmo.pass_options.verbose = verbose;
    PassManager pm(pmo);  // unknown pass names fail here, before any I/O
    EmitOptions eo;
    eo.mode = parse_emit_mode(emit);  // a bad value fails here too

    check_output_path(out_path, in_path, "output");
    if (!report_path.empty()) check_output_path(report_path, in_path, "report");
    if (!dot_path.empty()) check_output_path(dot_path, in_path, "dot");

    auto g = load_model(in_path);
    FusionReport report;
    report.set_model(in_path, out_path);
    std::map<std::string, FusedOrigin> origins;
    try {
      origins = pm.run(*g, report);
      apply_emit(*g, eo, &report);
    } catch (const Error& e) {
      throw Error(in_path + ": " + e.what());
    }

    // Everything is computed before anything is written.
    std::string json = report_path.empty() ? std::string() : report.to_json();
    std::string dot = dot_path.empty() ? std::string() : graph_to_dot(*g, origins);
    SaveOptions so;
    so.input_path = in_path;
    if (external_data) so.external = SaveOptions::External::Always;
    save_model(*g, out_path, so);
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
    if (!quiet) std::cout << report.to_table(verbose > 0) << std::flush;
    return 0;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}
