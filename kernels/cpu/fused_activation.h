// The activations fuseopt.FusedMatMul / LayerNormLinear fold in, shared by the
// CPU kernels so every fused op computes them the same way. tanh is BERT's
// pooler (dense + tanh on the first token), also RoBERTa's classification head;
// relu2 (squared ReLU, r * r with r = max(x, 0)) is Nemotron's and Persimmon's MLP;
// quick_gelu (x * sigmoid(1.702 x)) is CLIP's; silu (x * sigmoid(x)) a plain SiLU.
#pragma once
#include <cmath>
#include <string>

#include "ir/graph.h"
#include "util/error.h"

namespace fuseopt::cpu {

enum class Activation { None, Relu, Gelu, GeluTanh, Tanh, Relu2, QuickGelu, Silu };

inline Activation parse_activation(const Node& n) {
  const std::string a = n.attr_string("activation", "none");
  if (a == "none" || a.empty()) return Activation::None;
  if (a == "relu") return Activation::Relu;
  if (a == "gelu") return Activation::Gelu;
  if (a == "gelu_tanh") return Activation::GeluTanh;
  if (a == "tanh") return Activation::Tanh;
  if (a == "relu2") return Activation::Relu2;
  if (a == "quick_gelu") return Activation::QuickGelu;
  if (a == "silu") return Activation::Silu;
  throw Error(n.label() + ": unknown activation '" + a +
              "' (none, relu, gelu, gelu_tanh, tanh, relu2, quick_gelu, silu)");
}

inline float apply_activation(Activation act, float x) {
  switch (act) {
    case Activation::None: return x;
    case Activation::Relu: return x > 0.0f ? x : (x == x ? 0.0f : x);  // NaN stays NaN
    case Activation::Gelu: return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
    case Activation::GeluTanh: {
      const float inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);
      return 0.5f * x * (1.0f + std::tanh(inner));
    }
    case Activation::Tanh: return std::tanh(x);
    case Activation::Relu2: {
      // The graph's Pow(Relu(x), 2) in fp32: r * r is the exactly rounded square, as powf gives.
      const float r = apply_activation(Activation::Relu, x);
      return r * r;
    }
    // The graph's Mul(x, Sigmoid(Mul(x, 1.702))) in fp32, the sigmoid as 1 / (1 + exp(-z)).
    case Activation::QuickGelu: return x * (1.0f / (1.0f + std::exp(-(x * 1.702f))));
    case Activation::Silu: return x * (1.0f / (1.0f + std::exp(-x)));
  }
  return x;
}

}  // namespace fuseopt::cpu
