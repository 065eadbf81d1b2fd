// The ONNX operator versions after what Debian's libonnx (1.12: opset 17, ai.onnx.ml 3)
// knows, up to the opsets fuseopt reads (kMaxKnownOpset = 28, ai.onnx.ml 5).
//
// One row per version whose formal inputs/outputs, attributes or deprecation
// changed, and one per op new in these opsets. Versions that only widened the
// element types (opset 19/21/22/23 float8, int4, bfloat16 ...) need no row: the
// validation does not check element types, so the earlier row stays right.
// Spelling: make_signature (op_signature.h). tests/py/test_schema_validation.py
// compares every op at every opset 1..28 (ai.onnx.ml 1..5) with the onnx
// package's schemas, so a wrong or missing row fails there.
#include "onnx_io/op_schemas.h"

namespace fuseopt {

namespace {

struct Row {
  const char* domain;
  const char* op;
  int since;
  const char* inputs;
  const char* outputs;
  const char* attrs;
  bool deprecated = false;
};

constexpr bool kDeprecated = true;

const Row kRows[] = {
    // opset 18: reductions take axes as an input; Split gets num_outputs; Pad an axes
    // input; Resize antialias/axes/keep_aspect_ratio_policy; LpPool ceil_mode/dilations;
    // OptionalHasElement's input becomes optional; new bitwise ops, CenterCropPad,
    // Col2Im, GroupNormalization (deprecated again in ONNX 1.16 for opset 21's), Mish.
    {"", "BitwiseAnd", 18, "A B", "C", ""},
    {"", "BitwiseNot", 18, "X", "Y", ""},
    {"", "BitwiseOr", 18, "A B", "C", ""},
    {"", "BitwiseXor", 18, "A B", "C", ""},
    {"", "CenterCropPad", 18, "input_data shape", "output_data", "axes:is"},
    {"", "Col2Im", 18, "input image_shape block_shape", "output", "dilations:is pads:is strides:is"},
    {"", "GroupNormalization", 18, "X scale bias", "Y", "epsilon:f num_groups:i!", kDeprecated},
    {"", "LpPool", 18, "X", "Y", "auto_pad:s ceil_mode:i dilations:is kernel_shape:is! p:i pads:is strides:is"},
    {"", "Mish", 18, "X", "Y", ""},
    {"", "OptionalHasElement", 18, "input?", "output", ""},
    {"", "Pad", 18, "data pads constant_value? axes?", "output", "mode:s"},
    {"", "ReduceL1", 18, "data axes?", "reduced", "keepdims:i noop_with_empty_axes:i"},
    {"", "ReduceL2", 18, "data axes?", "reduced", "keepdims:i noop_with_empty_axes:i"},
    {"", "ReduceLogSum", 18, "data axes?", "reduced", "keepdims:i noop_with_empty_axes:i"},
    {"", "ReduceLogSumExp", 18, "data axes?", "reduced", "keepdims:i noop_with_empty_axes:i"},
    {"", "ReduceMax", 18, "data axes?", "reduced", "keepdims:i noop_with_empty_axes:i"},
    {"", "ReduceMean", 18, "data axes?", "reduced", "keepdims:i noop_with_empty_axes:i"},
    {"", "ReduceMin", 18, "data axes?", "reduced", "keepdims:i noop_with_empty_axes:i"},
    {"", "ReduceProd", 18, "data axes?", "reduced", "keepdims:i noop_with_empty_axes:i"},
    {"", "ReduceSumSquare", 18, "data axes?", "reduced", "keepdims:i noop_with_empty_axes:i"},
    {"", "Resize", 18, "X roi? scales? sizes?", "Y",
     "antialias:i axes:is coordinate_transformation_mode:s cubic_coeff_a:f exclude_outside:i extrapolation_value:f "
     "keep_aspect_ratio_policy:s mode:s nearest_mode:s"},
    {"", "Split", 18, "input split?", "outputs*", "axis:i num_outputs:i"},

    // opset 19: Cast/CastLike/QuantizeLinear saturate, AveragePool dilations, DeformConv.
    {"", "AveragePool", 19, "X", "Y",
     "auto_pad:s ceil_mode:i count_include_pad:i dilations:is kernel_shape:is! pads:is strides:is"},
    {"", "Cast", 19, "input", "output", "saturate:i to:i!"},
    {"", "CastLike", 19, "input target_type", "output", "saturate:i"},
    {"", "DeformConv", 19, "X W offset B? mask?", "Y",
     "dilations:is group:i kernel_shape:is offset_group:i pads:is strides:is"},
    {"", "QuantizeLinear", 19, "x y_scale y_zero_point?", "y", "axis:i saturate:i"},

    // opset 20: DFT's axis moves to an input; AffineGrid, Gelu, ImageDecoder, string ops.
    {"", "AffineGrid", 20, "theta size", "grid", "align_corners:i"},
    {"", "DFT", 20, "input dft_length? axis?", "output", "inverse:i onesided:i"},
    {"", "Gelu", 20, "X", "Y", "approximate:s"},
    {"", "ImageDecoder", 20, "encoded_stream", "image", "pixel_format:s"},
    {"", "RegexFullMatch", 20, "X", "Y", "pattern:s"},
    {"", "StringConcat", 20, "X Y", "Z", ""},
    {"", "StringSplit", 20, "X", "Y Z", "delimiter:s maxsplit:i"},

    // opset 21: blocked quantization, GroupNormalization per channel with stash_type.
    {"", "DequantizeLinear", 21, "x x_scale x_zero_point?", "y", "axis:i block_size:i"},
    {"", "GroupNormalization", 21, "X scale bias", "Y", "epsilon:f num_groups:i! stash_type:i"},
    {"", "QuantizeLinear", 21, "x y_scale y_zero_point?", "y", "axis:i block_size:i output_dtype:i saturate:i"},

    // opset 23: Attention, RMSNormalization, RotaryEmbedding; quantization output_dtype/precision.
    {"", "Attention", 23, "Q K V attn_mask? past_key? past_value?", "Y present_key? present_value? qk_matmul_output?",
     "is_causal:i kv_num_heads:i q_num_heads:i qk_matmul_output_mode:i scale:f softcap:f softmax_precision:i"},
    {"", "DequantizeLinear", 23, "x x_scale x_zero_point?", "y", "axis:i block_size:i output_dtype:i"},
    {"", "QuantizeLinear", 23, "x y_scale y_zero_point?", "y",
     "axis:i block_size:i output_dtype:i precision:i saturate:i"},
    {"", "RMSNormalization", 23, "X scale", "Y", "axis:i epsilon:f stash_type:i"},
    {"", "RotaryEmbedding", 23, "X cos_cache sin_cache position_ids?", "Y",
     "interleaved:i num_heads:i rotary_embedding_dim:i"},

    // opset 24: Attention's nonpad_kv_seqlen input (the kernels refuse it by name), Cast/CastLike
    // round_mode (for float8e8m0 targets, a type fuseopt does not load), new Swish and
    // TensorScatter (no kernels: a model using them is named as such at run time). The other
    // opset-24 versions only widened element types.
    {"", "Attention", 24, "Q K V attn_mask? past_key? past_value? nonpad_kv_seqlen?",
     "Y present_key? present_value? qk_matmul_output?",
     "is_causal:i kv_num_heads:i q_num_heads:i qk_matmul_output_mode:i scale:f softcap:f softmax_precision:i"},
    {"", "Cast", 24, "input", "output", "round_mode:s saturate:i to:i!"},
    {"", "CastLike", 24, "input target_type", "output", "round_mode:s saturate:i"},
    {"", "Swish", 24, "X", "Y", "alpha:f"},
    {"", "TensorScatter", 24, "past_cache update write_indices?", "present_cache", "axis:i mode:s"},

    // opset 25: Attention's sliding window (left/right_window_size); every other opset-25 version
    // only added the int2/uint2 element types. 26: BitCast, CumProd. 27: Range's stash_type (and
    // float16/bfloat16 inputs); CausalConvWithState and LinearAttention (no kernels: named at run
    // time). 28: SpaceToDepth's mode (DCR/CRD, as DepthToSpace), SwiGLU; the other opset-28
    // versions widened or narrowed element types (Cast/QuantizeLinear float6, ReduceLogSum(Exp)
    // without integers) or reworded semantics the kernels already had (Mod's special values).
    {"", "Attention", 25, "Q K V attn_mask? past_key? past_value? nonpad_kv_seqlen?",
     "Y present_key? present_value? qk_matmul_output?",
     "is_causal:i kv_num_heads:i left_window_size:i q_num_heads:i qk_matmul_output_mode:i right_window_size:i "
     "scale:f softcap:f softmax_precision:i"},
    {"", "BitCast", 26, "input", "output", "to:i!"},
    {"", "CumProd", 26, "x axis", "y", "exclusive:i reverse:i"},
    {"", "CausalConvWithState", 27, "input weight bias? past_state?", "output present_state", "activation:s"},
    {"", "LinearAttention", 27, "query key value past_state? decay? beta?", "output present_state",
     "chunk_size:i kv_num_heads:i! q_num_heads:i! scale:f update_rule:s"},
    {"", "Range", 27, "start limit delta", "output", "stash_type:i"},
    {"", "SpaceToDepth", 28, "input", "output", "blocksize:i! mode:s"},
    {"", "SwiGLU", 28, "A B", "Y", "alpha:f"},

    // ai.onnx.ml 4: LabelEncoder tensor keys/values. 5: TreeEnsemble replaces the
    // classifier and regressor, whose version-5 rows only mark them deprecated.
    {"ai.onnx.ml", "LabelEncoder", 4, "X", "Y",
     "default_float:f default_int64:i default_string:s default_tensor:t keys_floats:fs keys_int64s:is "
     "keys_strings:ss keys_tensor:t values_floats:fs values_int64s:is values_strings:ss values_tensor:t"},
    {"ai.onnx.ml", "TreeEnsemble", 5, "X", "Y",
     "aggregate_function:i leaf_targetids:is! leaf_weights:t! membership_values:t n_targets:i "
     "nodes_falseleafs:is! nodes_falsenodeids:is! nodes_featureids:is! nodes_hitrates:t "
     "nodes_missing_value_tracks_true:is nodes_modes:t! nodes_splits:t! nodes_trueleafs:is! "
     "nodes_truenodeids:is! post_transform:i tree_roots:is!"},
    {"ai.onnx.ml", "TreeEnsembleClassifier", 5, "X", "Y Z",
     "base_values:fs base_values_as_tensor:t class_ids:is class_nodeids:is class_treeids:is class_weights:fs "
     "class_weights_as_tensor:t classlabels_int64s:is classlabels_strings:ss nodes_falsenodeids:is "
     "nodes_featureids:is nodes_hitrates:fs nodes_hitrates_as_tensor:t nodes_missing_value_tracks_true:is "
     "nodes_modes:ss nodes_nodeids:is nodes_treeids:is nodes_truenodeids:is nodes_values:fs "
     "nodes_values_as_tensor:t post_transform:s",
     kDeprecated},
    {"ai.onnx.ml", "TreeEnsembleRegressor", 5, "X", "Y",
     "aggregate_function:s base_values:fs base_values_as_tensor:t n_targets:i nodes_falsenodeids:is "
     "nodes_featureids:is nodes_hitrates:fs nodes_hitrates_as_tensor:t nodes_missing_value_tracks_true:is "
     "nodes_modes:ss nodes_nodeids:is nodes_treeids:is nodes_truenodeids:is nodes_values:fs "
     "nodes_values_as_tensor:t post_transform:s target_ids:is target_nodeids:is target_treeids:is "
     "target_weights:fs target_weights_as_tensor:t",
     kDeprecated},
};

}  // namespace

const std::vector<OpSignature>& newer_onnx_signatures() {
  static const std::vector<OpSignature> rows = [] {
    std::vector<OpSignature> out;
    for (const Row& r : kRows) {
      out.push_back(make_signature(r.domain, r.op, r.since, r.inputs, r.outputs, r.attrs));
      out.back().deprecated = r.deprecated;
    }
    return out;
  }();
  return rows;
}

}  // namespace fuseopt
