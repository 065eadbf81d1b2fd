// CUDA Gather / GatherElements / GatherND / ScatterND / ScatterElements
// against the CPU reference kernels: negative indices, int32 and int64
// indices, batch_dims, reductions, and every element size.
#include <catch2/catch.hpp>

#include "support/cuda_generic_check.h"

using namespace fuseopt;
using namespace fuseopt::cuda_generic;

TEST_CASE("cuda Gather", "[cuda][gather]") {
  if (!gpu_ready()) return;
  // Embedding lookup (token ids within the table), negative indices, int32 ids.
  for (DType dt : {DType::Float, DType::Float16, DType::BFloat16}) {
    Case emb("Gather", 2);
    emb.in(0, randn({1000, 129})).in(1, randint({2, 16}, 0, 999));
    emb.check(dt);
  }
  // Rows of whole 16-byte vectors take gather_vec_kernel (BERT's [vocab, 768] table; a 16-byte
  // row; an inner axis of 4 x 8 elements behind an outer one; int8 rows of 48), with negative and
  // int32 indices; the 129-column table above stays on the element kernel.
  for (DType dt : {DType::Float, DType::Float16, DType::BFloat16}) {
    Case emb("Gather", 2);
    emb.in(0, randn({301, 768})).in(1, randint({3, 37}, -301, 300));
    INFO("768-wide rows, " << dtype_name(dt));
    emb.check(dt);
  }
  {
    Case narrow("Gather", 2);
    narrow.in(0, randn({7, 8})).in(1, randint({5}, -7, 6, DType::Int32));
    narrow.check(DType::Float16);
    Case inner("Gather", 2);
    inner.attr(Attribute::make_int("axis", 1)).in(0, randn({3, 10, 4, 8})).in(1, randint({2, 3}, -10, 9));
    inner.check(DType::Float16);
    Case bytes("Gather", 2);
    bytes.in(0, randint({9, 48}, -100, 100, DType::Int8)).in(1, randint({4}, 0, 8));
    bytes.check();
  }
  for (int64_t axis : {0, 1, -1}) {
    Case c("Gather", 2);
    c.attr(Attribute::make_int("axis", axis)).in(0, randint({5, 6, 7}, -50, 50)).in(1, randint({3, 2}, -5, 4, DType::Int32));
    INFO("axis " << axis);
    c.check();
  }
  Case scalar_idx("Gather", 2);  // a scalar index drops the axis
  scalar_idx.attr(Attribute::make_int("axis", 1)).in(0, randn({4, 9, 3})).in(1, scalar_i64(-2));
  scalar_idx.check();
}

TEST_CASE("cuda GatherElements and GatherND", "[cuda][gather]") {
  if (!gpu_ready()) return;
  for (int64_t axis : {0, 1, -1}) {
    Case c("GatherElements", 2);
    c.attr(Attribute::make_int("axis", axis)).in(0, randn({4, 5, 6})).in(1, randint({4, 3, 6}, -4, 3));
    INFO("axis " << axis);
    c.check();
  }
  Case pos("GatherElements", 2);  // RoBERTa-style position lookup
  pos.attr(Attribute::make_int("axis", 1)).in(0, randint({2, 40}, 0, 500)).in(1, randint({2, 16}, 0, 39));
  pos.check();

  Case nd("GatherND", 2);
  nd.in(0, randn({4, 5, 6})).in(1, randint({3, 2}, -4, 3));
  nd.check();
  Case nd_full("GatherND", 2);
  nd_full.in(0, randint({4, 5}, -9, 9)).in(1, randint({7, 2}, 0, 3, DType::Int32));
  nd_full.check();
  Case nd_batch("GatherND", 2);
  nd_batch.attr(Attribute::make_int("batch_dims", 1)).in(0, randn({3, 5, 6})).in(1, randint({3, 4, 1}, 0, 4));
  nd_batch.check();
}

TEST_CASE("cuda ScatterND and ScatterElements", "[cuda][scatter]") {
  if (!gpu_ready()) return;
  Case nd("ScatterND", 3);
  nd.in(0, randn({6, 5})).in(1, ints({4, 0, 1}, {3, 1})).in(2, randn({3, 5}));
  nd.check();
  Case nd_elems("ScatterND", 3);
  nd_elems.in(0, randint({4, 4}, -9, 9)).in(1, ints({0, 1, 3, 3, -1, 0}, {3, 2})).in(2, randint({3}, 10, 20));
  nd_elems.check();
  for (const char* red : {"add", "mul", "max", "min"}) {
    Case r("ScatterND", 3);  // duplicate indices: reductions must apply every update
    r.attr(Attribute::make_string("reduction", red)).in(0, randn({5, 3})).in(1, ints({1, 1, 4, 1}, {4, 1})).in(2, randn({4, 3}));
    INFO(red);
    r.check();
  }
  for (int64_t axis : {0, 1}) {
    Case se("ScatterElements", 3);
    se.attr(Attribute::make_int("axis", axis)).in(0, randn({4, 5})).in(1, ints({0, 3, 1, 2, 1, 0}, {2, 3})).in(2, randn({2, 3}));
    INFO("axis " << axis);
    se.check();
    Case add("ScatterElements", 3);
    add.attr(Attribute::make_int("axis", axis)).attr(Attribute::make_string("reduction", "add"));
    add.in(0, randn({4, 5})).in(1, ints({0, 0, 1, 0, 0, 1}, {2, 3})).in(2, randn({2, 3}));
    add.check();
  }
}
