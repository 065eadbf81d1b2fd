// Model inputs for the command-line tools (and the Python API): shapes given
// as NAME=DIMS flags (fuserun --shape, fuseopt --input-shape), inputs
// generated deterministically (seeded), or read from a folder in the ONNX
// backend-test layout (input_N.pb / output_N.pb). Compiled once, into
// libfuseopt; tools/fuserun/inputs.h re-exports it under fuseopt::fuserun.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"

namespace fuseopt::cli {

// --shape NAME=DIMS, NAME either a graph input ("input_ids=8x128") or a
// symbolic dim ("batch=8"). Throws Error on a malformed spec or unknown name;
// messages name the option as `opt` ("--shape" for fuserun, "--input-shape"
// for fuseopt).
struct ShapeOverrides {
  std::map<std::string, std::vector<int64_t>> inputs;
  std::map<std::string, int64_t> symbols;
  // --past N (KV-cache decoders): every input named like a cache ("past" in
  // its name, rank >= 3) gets N cached positions on its axis rank-2 (the S of
  // [B, H, S, D]); the new tokens default to 1 (one decode step) instead of
  // 128; a rank-2 "mask" input whose length is still free covers N + new.
  int64_t past = -1;
  std::string flag = "--shape";  // the option the specs came from, for messages
};
ShapeOverrides parse_shape_flags(const Graph& g, const std::vector<std::string>& flags,
                                 const std::string& opt = "--shape");

// fuseopt --input-shape: the declared shapes of the graph inputs become the
// given literal dims (an input named in `o`, or the symbols it binds, or a
// symbol given directly), and every bound symbol is replaced by its number
// wherever a value's shape names it; dims no spec binds stay symbolic.
// Checks rank, fixed dims and consistency like resolve_input_shapes, and
// refuses dims < 1. Returns the bound symbols. Shape inference is the
// caller's (the PassManager runs it before the first pass).
std::map<std::string, int64_t> specialize_input_shapes(Graph& g, const ShapeOverrides& o);

// Concrete shapes of every graph input: overrides first; a symbolic dim
// takes its symbol's bound value, else batch (1) for the first symbolic dim
// of an input and seq (128) for the second (and later) ones.
// `defaulted`, when given, receives "name=value" for every symbol (or
// anonymous dim) that took a default, for error hints.
std::map<std::string, std::vector<int64_t>> resolve_input_shapes(const Graph& g, const ShapeOverrides& o,
                                                                 std::vector<std::string>* defaulted = nullptr);

// Seeded inputs with valid values: token ids below the embedding table's
// size, masks of ones, token_type ids 0, position ids 0..n-1, floats N(0,1).
std::map<std::string, Tensor> generate_inputs(const Graph& g, const std::map<std::string, std::vector<int64_t>>& shapes,
                                              uint64_t seed);

// KV-cache decoders by their names, as --past and --generate find them: a cache input has "past"
// in its name and a declared rank >= 3; a cache output has "present" in its name; a mask input
// has "mask" in its name and a declared rank of 2.
bool is_cache_input(const Value* v);
bool is_cache_output(const Value* v);
bool is_mask_input(const Value* v);

// input_N.pb for every graph input and output_N.pb for every graph output, each
// matched by name when the protos carry distinct graph names, else by position;
// `outputs` follows the graph's output order. An output_N.pb beyond the model's
// outputs is an error (every reference is compared, none skipped).
struct CheckData {
  std::map<std::string, Tensor> inputs;
  std::vector<Tensor> outputs;
};
CheckData read_check_dir(const Graph& g, const std::string& dir);

}  // namespace fuseopt::cli
