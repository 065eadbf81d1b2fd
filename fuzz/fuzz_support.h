// What the libFuzzer targets in fuzz/ share: the rule for what counts as a
// finding, and a quiet library.
//
// A model the library refuses is no finding: it throws fuseopt::Error, whose
// message must be one non-empty line (the CLI prints it as its one error line).
// Everything else is: a crash or sanitizer report (the sanitizers abort), a
// hang or an out-of-memory (libFuzzer's -timeout / -rss_limit_mb), any other
// exception type (std::out_of_range, std::bad_alloc, ...: the CLI would print
// its bare what() without naming the file, node or op), an Error message with
// a line break, and a target-specific property that does not hold.
#pragma once
#include <spdlog/spdlog.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>

#include "onnx_io/onnx_io.h"
#include "util/error.h"

namespace fuseopt::fuzz {

// The label the library puts in its messages instead of a file name.
inline constexpr const char* kLabel = "fuzz-input.onnx";
// External data is looked up here: a folder that does not exist, so a
// tensor naming a side file is refused without touching the disk around it.
inline constexpr const char* kNoSuchDir = "/nonexistent-fuseopt-fuzz-dir";

[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "FUZZ FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// Runs body(); returns true when it completed, false when the library refused
// the input with a well-formed Error (one line; naming `must_name` when given).
// Aborts on anything else.
template <class Body>
bool run_guarded(const char* stage, Body&& body, const char* must_name = nullptr) {
  try {
    body();
    return true;
  } catch (const Error& e) {
    std::string msg = e.what();
    if (msg.empty()) finding(std::string(stage) + ": fuseopt::Error with an empty message");
    if (msg.find('\n') != std::string::npos)
      finding(std::string(stage) + ": fuseopt::Error message spans lines: " + msg);
    if (must_name && msg.find(must_name) == std::string::npos)
      finding(std::string(stage) + ": refusal does not name '" + must_name + "': " + msg);
    return false;
  } catch (const std::exception& e) {
    finding(std::string(stage) + ": exception other than fuseopt::Error escaped: " + e.what());
  } catch (...) {
    finding(std::string(stage) + ": non-std exception escaped");
  }
}

// Library warnings go through spdlog; a fuzzer prints none of them.
inline void quiet_library() { spdlog::set_level(spdlog::level::off); }

// Loads the fuzzer's bytes; nullptr when the library refused them (checked).
inline std::unique_ptr<Graph> load_input(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<Graph> g;
  run_guarded("load", [&] { g = load_model_from_bytes(bytes, kNoSuchDir, kLabel); }, kLabel);
  return g;
}

}  // namespace fuseopt::fuzz
