// Conv + BatchNormalization folding: numbers match the unfolded graph; the
// legality rules (1: conv output read elsewhere, 2: non-constant statistics).
#include "support/fusion_check.h"

using namespace fuseopt;
using namespace fuseopt::test;
using Catch::Matchers::Contains;

namespace {
void build(GraphBuilder& b, bool conv_bias, bool mean_input = false, bool leak_conv = false, int64_t group = 1) {
  Value* x = b.input("x", DType::Float, {2, 4, 5, 5});
  std::vector<Value*> in{x, b.constant("W", rand_tensor({6, 4 / group, 3, 3}, 1))};
  if (conv_bias) in.push_back(b.constant("B", rand_tensor({6}, 2)));
  Value* c = b.op("Conv", in,
                  {Attribute::make_ints("kernel_shape", {3, 3}), Attribute::make_ints("pads", {1, 1, 1, 1}),
                   Attribute::make_int("group", group)},
                  "conv");
  Value* mean = mean_input ? b.input("mean", DType::Float, {6}) : b.constant("mean", rand_tensor({6}, 3));
  Value* y = b.op("BatchNormalization",
                  {c, b.constant("scale", rand_tensor({6}, 4, 0.5f, 2.0f)), b.constant("bias", rand_tensor({6}, 5)),
                   mean, b.constant("var", rand_tensor({6}, 6, 0.1f, 3.0f))},
                  {Attribute::make_float("epsilon", 1e-3f)});
  b.output(b.op("Relu", {y}));
  if (leak_conv) b.output(c);
}
}  // namespace

TEST_CASE("ConvBnFold: BatchNormalization folds into the Conv", "[passes][ConvBnFold]") {
  for (bool conv_bias : {true, false}) {
    for (int64_t group : {1, 2}) {
      GraphBuilder b(17);
      build(b, conv_bias, false, false, group);
      auto before = clone_graph(b.graph());
      FusionReport r = run_one_pass(b.graph(), "ConvBnFold");
      CHECK(matched(r, "ConvBnFold") == 1);
      CHECK(count_op(b.graph(), "BatchNormalization") == 0);
      CHECK(count_op(b.graph(), "Conv") == 1);
      require_same_outputs(*before, b.graph(), {{"x", rand_tensor({2, 4, 5, 5}, 7, -2.0f, 2.0f)}}, 1e-5f);
    }
  }
}

TEST_CASE("ConvBnFold rule 2: running mean is not a constant", "[passes][ConvBnFold][legality]") {
  GraphBuilder b(17);
  build(b, true, true);
  FusionReport r = run_one_pass(b.graph(), "ConvBnFold");
  CHECK(matched(r, "ConvBnFold") == 0);
  CHECK(count_op(b.graph(), "BatchNormalization") == 1);
  CHECK_THAT(reasons(r, "ConvBnFold"), Contains("rule 2") && Contains("mean"));
}

TEST_CASE("ConvBnFold rule 1: the Conv output is also a graph output", "[passes][ConvBnFold][legality]") {
  GraphBuilder b(17);
  build(b, true, false, true);
  FusionReport r = run_one_pass(b.graph(), "ConvBnFold");
  CHECK(matched(r, "ConvBnFold") == 0);
  CHECK_THAT(reasons(r, "ConvBnFold"), Contains("rule 1"));
}
