// Ops declare the float inputs that set output shapes (kept fp32 by the
// session under fp16/bf16): the declarations are registered and looked up.
#include <catch2/catch.hpp>

#include "runtime/parameter_inputs.h"

using namespace fuseopt;

TEST_CASE("fp32 parameter inputs: Resize roi/scales, Upsample scales, none elsewhere", "[unit][runtime]") {
  CHECK(fp32_parameter_inputs("Resize") == std::vector<int>{1, 2});
  CHECK(fp32_parameter_inputs("Upsample") == std::vector<int>{1});
  CHECK(fp32_parameter_inputs("Add").empty());
}
