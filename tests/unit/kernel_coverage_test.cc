// Issue 5's first deliverable as a standing check: every op the CPU reference
// backend runs also has a CUDA kernel (when the library is built with CUDA),
// so a model that runs on the CPU never fails on the GPU for lack of a kernel.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "runtime/kernel.h"

using namespace fuseopt;

TEST_CASE("every op with a CPU kernel has a CUDA kernel", "[unit][kernels]") {
  std::set<std::string> cpu, cuda;
  for (const KernelInfo* k : all_kernels()) {
    // Kernels a test registers for itself (domain "fuseopt.test", e.g. session_test.cc's probe)
    // are not ops a model can use.
    if (k->domain == "fuseopt.test") continue;
    const std::string key = (k->domain.empty() ? std::string("ai.onnx") : k->domain) + "::" + k->op;
    if (k->backend == Backend::CPU) cpu.insert(key);
    if (k->backend == Backend::CUDA) cuda.insert(key);
  }
  REQUIRE(cpu.size() > 100);  // the registry is populated (the test can fail)
  if (cuda.empty()) {
    WARN("built without CUDA: no CUDA kernels to compare");
    return;
  }
  // Constant produces a host value in every session (uploaded once when a
  // device kernel reads it), so it needs no device kernel.
  const std::set<std::string> host_only = {"ai.onnx::Constant"};
  std::string missing;
  for (const std::string& op : cpu)
    if (!cuda.count(op) && !host_only.count(op)) missing += " " + op;
  INFO("CPU-only ops:" << missing);
  CHECK(missing.empty());
}
