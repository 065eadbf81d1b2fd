// Shape functions: MatMul (numpy matmul rules), Gemm, Einsum.
#include <map>

#include "ir/shape_ops/common.h"
#include "kernels/common/einsum_equation.h"

namespace fuseopt::shape_ops {

// Numpy matmul of two shapes: 1-D operands are promoted and the promoted axis
// dropped again; batch dims broadcast; inner dims must agree.
Shape matmul_shape(const ShapeContext& c, const Shape& a, const Shape& b) {
  if (a.empty() || b.empty()) c.fail("MatMul operands must have rank >= 1 (got " + shp(a) + ", " + shp(b) + ")");
  Shape a2 = a.size() == 1 ? Shape{Dim::of(1), a[0]} : a;
  Shape b2 = b.size() == 1 ? Shape{b[0], Dim::of(1)} : b;
  const Dim& ka = a2[a2.size() - 1];
  const Dim& kb = b2[b2.size() - 2];
  if (dims_conflict(ka, kb))
    c.fail("inner dimensions differ: " + shp(a) + " x " + shp(b) + " (" + ka.str() + " vs " + kb.str() + ")");
  auto batch = broadcast_shapes(Shape(a2.begin(), a2.end() - 2), Shape(b2.begin(), b2.end() - 2));
  if (!batch) c.fail("batch dimensions do not broadcast: " + shp(a) + " x " + shp(b));
  Shape out = *batch;
  if (a.size() > 1) out.push_back(a2[a2.size() - 2]);
  if (b.size() > 1) out.push_back(b2[b2.size() - 1]);
  return out;
}

FUSEOPT_SHAPE_FN("", "MatMul", [](ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  const Shape* a = shape_of(c, 0);
  const Shape* b = shape_of(c, 1);
  if (a && b) c.set_output_shape(0, matmul_shape(c, *a, *b));
});

FUSEOPT_SHAPE_FN("", "Gemm", [](ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  const Shape* a = shape_of(c, 0);
  const Shape* b = shape_of(c, 1);
  if (a && a->size() != 2) c.fail("Gemm A must be 2-D, got " + shp(*a));
  if (b && b->size() != 2) c.fail("Gemm B must be 2-D, got " + shp(*b));
  if (!a || !b) return;
  const bool ta = c.node().attr_int("transA", 0) != 0, tb = c.node().attr_int("transB", 0) != 0;
  const Dim m = (*a)[ta ? 1 : 0], ka = (*a)[ta ? 0 : 1];
  const Dim kb = (*b)[tb ? 1 : 0], n = (*b)[tb ? 0 : 1];
  if (dims_conflict(ka, kb)) c.fail("inner dimensions differ: A " + shp(*a) + ", B " + shp(*b));
  Shape out{m, n};
  if (const Shape* cs = shape_of(c, 2)) {
    auto bc = broadcast_shapes(out, *cs);
    if (!bc || bc->size() != 2) c.fail("C " + shp(*cs) + " does not broadcast to " + shp(out));
    // C broadcasts to [M, N]; a known dim in C pins a symbolic M or N.
    for (size_t i = 0; i < 2; ++i)
      if (!out[i].known() && (*bc)[i].known()) out[i] = (*bc)[i];
  }
  c.set_output_shape(0, out);
});

// Einsum: labels are letters, "..." is broadcast dims. Without "->" the output
// is the ellipsis dims followed by the labels used once, sorted. The terms come
// from the kernels' splitter (kernels/common/einsum_equation.h).
FUSEOPT_SHAPE_FN("", "Einsum", [](ShapeContext& c) {
  c.set_output_dtype(0, c.input_dtype(0));
  const einsum::Terms split = einsum::split_terms(c.node().attr_string("equation", ""));
  const std::vector<std::string>& terms = split.inputs;
  if (terms.size() != c.num_inputs())
    c.fail("equation '" + split.text + "' has " + std::to_string(terms.size()) + " operands, node has " +
           std::to_string(c.num_inputs()));
  std::map<char, Dim> label_dim;
  std::map<char, int> label_count;
  Shape ellipsis;
  for (size_t t = 0; t < terms.size(); ++t) {
    const Shape* s = shape_of(c, t);
    if (!s) return;
    std::string term = terms[t];
    const auto dots = term.find("...");
    const size_t letters = term.size() - (dots == std::string::npos ? 0 : 3);
    if (letters > s->size() || (dots == std::string::npos && letters != s->size()))
      c.fail("operand " + std::to_string(t) + " " + shp(*s) + " does not match '" + term + "'");
    const size_t ell_rank = s->size() - letters;
    size_t axis = 0;
    for (size_t i = 0; i < term.size(); ++i) {
      if (dots != std::string::npos && i == dots) {
        Shape e(s->begin() + axis, s->begin() + axis + ell_rank);
        auto b = broadcast_shapes(ellipsis, e);
        if (!b) c.fail("'...' dims do not broadcast");
        ellipsis = *b;
        axis += ell_rank;
        i += 2;
        continue;
      }
      const char l = term[i];
      const Dim& d = (*s)[axis++];
      auto it = label_dim.find(l);
      if (it == label_dim.end()) {
        label_dim[l] = d;
      } else if (!(d.known() && d.value == 1)) {
        if (it->second.known() && it->second.value == 1) it->second = d;
        else {
          bool conflict = false;
          it->second = unify(it->second, d, conflict);
          if (conflict) c.fail(std::string("label '") + l + "' has sizes " + it->second.str() + " and " + d.str());
        }
      }
      ++label_count[l];
    }
  }
  std::string rhs;
  bool has_ellipsis_out = false;
  if (split.explicit_output) {
    rhs = split.output;
    has_ellipsis_out = rhs.find("...") != std::string::npos;
  } else {
    has_ellipsis_out = true;
    for (const auto& [l, n] : label_count)
      if (n == 1) rhs += l;
    rhs = "..." + rhs;
  }
  Shape out;
  for (size_t i = 0; i < rhs.size(); ++i) {
    if (rhs.compare(i, 3, "...") == 0) {
      out.insert(out.end(), ellipsis.begin(), ellipsis.end());
      i += 2;
      continue;
    }
    auto it = label_dim.find(rhs[i]);
    if (it == label_dim.end()) c.fail(std::string("output label '") + rhs[i] + "' is not an input label");
    out.push_back(it->second);
  }
  (void)has_ellipsis_out;
  c.set_output_shape(0, out);
});

}  // namespace fuseopt::shape_ops
