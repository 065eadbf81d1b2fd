// Einsum equation parsing and index planning shared by the CPU reference
// kernel (kernels/cpu/layer_norm_einsum.cc) and the CUDA kernel
// (kernels/cuda/einsum.cu), so the two backends cannot read an equation
// differently. Plain C++ (no CUDA), header-only, no KernelContext: errors
// throw fuseopt::Error prefixed with `where` (the node's label).
//
// Semantics (ONNX Einsum, numpy's rules):
// - spaces are ignored; terms are letters a-z / A-Z plus at most one "...";
// - "..." stands for the operand's dims not named by letters; ellipsis dims
//   are right-aligned across operands and broadcast (size 1 or equal);
// - a letter repeated inside one operand takes its diagonal;
// - explicit output ("->"): the given letters (no repeats), with "..." where
//   the ellipsis dims go (required when they are more than zero);
// - implicit output: the ellipsis dims first, then every letter that appears
//   exactly once over all operands, in alphabetical (ASCII) order, so
//   upper-case letters come before lower-case ones ("zA" -> "Az", as numpy
//   and the ONNX reference implementation).
// Ellipsis dims get the labels 0x80 + k (bytes that are no letter), so they
// never collide with the equation's own letters, upper-case ones included.
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "util/error.h"

namespace fuseopt::einsum {

inline constexpr unsigned kEllipsisLabel = 0x80;  // label of ellipsis dim k: 0x80 + k

inline bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
inline bool is_ellipsis_label(char c) { return static_cast<unsigned char>(c) >= kEllipsisLabel; }

// One label per dim: operands' and output's.
struct Equation {
  std::vector<std::string> inputs;
  std::string output;
  size_t ellipsis_rank = 0;  // broadcast rank of the "..." dims
};

// Readable form of a label string (ellipsis labels as "<k>").
inline std::string label_str(const std::string& labels) {
  std::string s;
  for (char c : labels)
    s += is_ellipsis_label(c) ? "<" + std::to_string(static_cast<unsigned char>(c) - kEllipsisLabel) + ">" : std::string(1, c);
  return s;
}

// An equation's terms as written, before any checks: spaces dropped, the
// operands' terms split at ',' (an empty string gives one empty term), and
// the output after the first "->" (none: explicit_output is false and output
// empty). Letters and "..." are kept as they are. The one splitter for every
// reader of an equation: parse_equation below, Einsum's shape function
// (src/ir/shape_ops/matmul.cc) and the einsum_to_matmul pass.
struct Terms {
  std::string text;  // the equation without its spaces
  std::vector<std::string> inputs;
  std::string output;
  bool explicit_output = false;
};

inline Terms split_terms(const std::string& eq_raw) {
  Terms t;
  for (char c : eq_raw)
    if (c != ' ') t.text += c;
  std::string lhs = t.text;
  const size_t arrow = t.text.find("->");
  t.explicit_output = arrow != std::string::npos;
  if (t.explicit_output) {
    lhs = t.text.substr(0, arrow);
    t.output = t.text.substr(arrow + 2);
  }
  size_t start = 0;
  for (size_t i = 0; i <= lhs.size(); ++i)
    if (i == lhs.size() || lhs[i] == ',') {
      t.inputs.push_back(lhs.substr(start, i - start));
      start = i + 1;
    }
  return t;
}

#define FUSEOPT_EINSUM_CHECK(cond, msg) FUSE_CHECK(cond, where << ": " << msg)

// Parses `eq_raw` for operands of the given ranks.
inline Equation parse_equation(const std::string& where, const std::string& eq_raw, const std::vector<size_t>& ranks) {
  const Terms split = split_terms(eq_raw);
  const std::vector<std::string>& terms = split.inputs;
  const std::string& rhs = split.output;
  const bool explicit_out = split.explicit_output;
  FUSEOPT_EINSUM_CHECK(terms.size() == ranks.size(), "equation '" << eq_raw << "' names " << terms.size()
                                                                  << " operands, got " << ranks.size());
  // A term: letters around at most one "..."; returns the letter count and
  // where the ellipsis starts (npos: none).
  auto scan = [&](const std::string& term, const char* what, size_t* ell_at) {
    *ell_at = term.find("...");
    size_t letters = 0;
    for (size_t i = 0; i < term.size(); ++i) {
      if (*ell_at != std::string::npos && i >= *ell_at && i < *ell_at + 3) continue;
      FUSEOPT_EINSUM_CHECK(is_letter(term[i]), "bad " << what << " '" << term << "' in equation '" << eq_raw
                                                      << "' (only letters a-z, A-Z and one '...')");
      ++letters;
    }
    return letters;
  };
  Equation e;
  std::vector<size_t> ell_of(terms.size(), 0), ell_at(terms.size());
  for (size_t t = 0; t < terms.size(); ++t) {
    const size_t letters = scan(terms[t], "term", &ell_at[t]);
    const bool has_ell = ell_at[t] != std::string::npos;
    FUSEOPT_EINSUM_CHECK(has_ell ? ranks[t] >= letters : ranks[t] == letters,
                         "operand " << t << " has rank " << ranks[t] << ", which does not match '" << terms[t]
                                    << "' in equation '" << eq_raw << "'");
    ell_of[t] = has_ell ? ranks[t] - letters : 0;
    e.ellipsis_rank = std::max(e.ellipsis_rank, ell_of[t]);
  }
  FUSEOPT_EINSUM_CHECK(e.ellipsis_rank < 0x80, "too many ellipsis dims");
  // The last r of the ellipsis_rank broadcast dims (right-aligned).
  auto ellipsis_labels = [&](size_t r) {
    std::string s;
    for (size_t k = e.ellipsis_rank - r; k < e.ellipsis_rank; ++k) s += static_cast<char>(kEllipsisLabel + k);
    return s;
  };
  auto expand = [&](const std::string& term, size_t at, size_t r) {
    return at == std::string::npos ? term : term.substr(0, at) + ellipsis_labels(r) + term.substr(at + 3);
  };
  for (size_t t = 0; t < terms.size(); ++t) e.inputs.push_back(expand(terms[t], ell_at[t], ell_of[t]));

  if (explicit_out) {
    size_t at = 0;
    scan(rhs, "output term", &at);
    FUSEOPT_EINSUM_CHECK(at != std::string::npos || e.ellipsis_rank == 0,
                         "equation '" << eq_raw << "': the operands' '...' dims need a '...' in the output");
    e.output = expand(rhs, at, e.ellipsis_rank);
    for (size_t i = 0; i < e.output.size(); ++i)
      FUSEOPT_EINSUM_CHECK(e.output.find(e.output[i], i + 1) == std::string::npos,
                           "equation '" << eq_raw << "': output letter '" << label_str(e.output.substr(i, 1))
                                        << "' repeats");
  } else {
    std::map<unsigned char, int> count;  // unsigned: ASCII order, letters before ellipsis labels
    for (const std::string& s : e.inputs)
      for (char c : s) count[static_cast<unsigned char>(c)]++;
    e.output = ellipsis_labels(e.ellipsis_rank);
    for (auto [c, k] : count)
      if (k == 1 && is_letter(static_cast<char>(c))) e.output += static_cast<char>(c);
  }
  return e;
}

// Everything an index walk needs: the output is dense `out_shape`; element
// o of it is the sum over every combination s of the summed labels
// (sum_shape, row-major) of prod_t operand_t[off_t(o) + off_t(s)], where the
// offsets use out_strides[t] / sum_strides[t] (elements; repeated labels
// add their strides, size-1 dims broadcast with stride 0).
struct Plan {
  Equation eq;
  std::vector<int64_t> out_shape;
  std::string summed;  // labels not in the output, in order of first appearance
  std::vector<int64_t> sum_shape;
  std::vector<std::vector<int64_t>> out_strides, sum_strides;  // [operand][dim]
};

inline Plan plan(const std::string& where, const std::string& eq_raw, const std::vector<std::vector<int64_t>>& shapes) {
  std::vector<size_t> ranks;
  for (const auto& s : shapes) ranks.push_back(s.size());
  Plan p;
  p.eq = parse_equation(where, eq_raw, ranks);
  const Equation& e = p.eq;
  std::map<char, int64_t> size;
  std::string order;  // labels by first appearance
  for (size_t t = 0; t < shapes.size(); ++t)
    for (size_t i = 0; i < e.inputs[t].size(); ++i) {
      const char c = e.inputs[t][i];
      const int64_t d = shapes[t][i];
      auto it = size.find(c);
      if (it == size.end()) {
        size[c] = d;
        order += c;
      } else if (it->second == 1) {
        it->second = d;
      } else {
        FUSEOPT_EINSUM_CHECK(d == 1 || d == it->second, "equation '" << eq_raw << "': dimension '" << label_str(std::string(1, c))
                                                                     << "' is " << it->second << " and " << d);
      }
    }
  for (char c : e.output) {
    FUSEOPT_EINSUM_CHECK(size.count(c), "equation '" << eq_raw << "': output letter '" << label_str(std::string(1, c))
                                                     << "' is not in any operand");
    p.out_shape.push_back(size[c]);
  }
  for (char c : order)
    if (e.output.find(c) == std::string::npos) {
      p.summed += c;
      p.sum_shape.push_back(size[c]);
    }
  auto strides_of = [&](size_t t, const std::string& labels) {
    const std::vector<int64_t>& shape = shapes[t];
    std::vector<int64_t> dense(shape.size(), 1);
    for (size_t i = shape.size(); i-- > 1;) dense[i - 1] = dense[i] * shape[i];
    std::vector<int64_t> st;
    for (char c : labels) {
      int64_t s = 0;
      for (size_t i = 0; i < e.inputs[t].size(); ++i)
        if (e.inputs[t][i] == c && shape[i] != 1) s += dense[i];
      st.push_back(s);
    }
    return st;
  };
  for (size_t t = 0; t < shapes.size(); ++t) {
    p.out_strides.push_back(strides_of(t, e.output));
    p.sum_strides.push_back(strides_of(t, p.summed));
  }
  return p;
}

#undef FUSEOPT_EINSUM_CHECK

}  // namespace fuseopt::einsum
