// A Session run on the CPU (the reference) and on CUDA, for the CUDA tests that run whole graphs
// (tests/kernels/cuda_session_test.cc, cuda_session_norm_fold_test.cc).
#pragma once
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "runtime/session.h"
#include "support/cuda_generic_check.h"

namespace fuseopt::cuda_generic {

inline bool bit_identical(const Tensor& a, const Tensor& b) {
  return a.dtype == b.dtype && a.dims == b.dims && a.bytes == b.bytes;
}

// g on the CPU (the reference) and on CUDA at p, run eager, captured and replayed: every output
// float, of the reference's dims, its replay bit-identical to the eager run, no stray NaN; returns
// each output's norm-wise relative error to the reference.
inline std::vector<double> float_output_errors(const Graph& g, const std::map<std::string, Tensor>& in, Precision p) {
  SessionOptions cpu_o;
  cpu_o.backend = Backend::CPU;
  const auto want = Session(g, cpu_o).run(in);
  SessionOptions o;
  o.backend = Backend::CUDA;
  o.precision = p;
  Session s(g, o);
  std::vector<Tensor> first, got;
  for (int rep = 0; rep < 3; ++rep) {  // eager, captured, replayed
    got = s.run(in);
    if (rep == 0) first = got;
  }
  std::vector<double> errs;
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("output " << i);
    REQUIRE(got[i].dtype == DType::Float);
    REQUIRE(got[i].dims == want[i].dims);
    CHECK(bit_identical(got[i], first[i]));
    bool nan_ok = true;
    errs.push_back(norm_rel_error(got[i], want[i], &nan_ok));
    CHECK(nan_ok);
  }
  return errs;
}

}  // namespace fuseopt::cuda_generic
