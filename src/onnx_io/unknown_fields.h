// Unknown protobuf fields on load. Debian's libonnx classes are generated from
// ONNX 1.12's onnx.proto, so a field ONNX added later (NodeProto.overload and
// metadata_props, FunctionProto.attribute_proto, ModelProto.configuration, ...)
// is parsed as an *unknown field*: bytes kept as they came, never looked into.
// Byte damage inside such a field, or a damaged tag (a known field number with
// another wire type), parses the same way in C++, and fuseopt would write it
// back into a file Python's protobuf parser (and so onnx.checker) refuses
// ("Wire format was corrupt"; docs/testing.md, mutation s20 m709).
//
// check_unknown_fields walks the whole parsed ModelProto (graph, subgraphs,
// functions, tensors, attributes) and decides about every unknown field:
//  - a field number this build's classes define, with another wire type, or an
//    enum value the enum does not define: damage, refused;
//  - a field ONNX added after 1.12, up to ONNX 1.23 (IR 14, the newest fuseopt
//    reads): its wire type must be the field's, and a message field's bytes
//    must parse as that message, whose own unknown fields are checked in turn;
//    else damage, refused. A well-formed one is kept where fuseopt keeps the
//    message (nodes, the graph's and the model's own fields, functions,
//    subgraphs) and dropped where it rebuilds it (value infos, tensors);
//  - a field number no ONNX release through IR 14 defines (a newer ONNX's, a
//    producer's extension): kept as before; every reader skips it.
// Damage is refused also under --no-validate: a file no ONNX parser reads is
// never a right output.
#pragma once
#include <string>

namespace onnx {
class ModelProto;
}

namespace fuseopt {

// Throws Error with one line naming the file and where, e.g.
//   m.onnx: damaged protobuf: graph.metadata_props[0] (GraphProto field 16) is not a well-formed StringStringEntryProto
void check_unknown_fields(const onnx::ModelProto& model, const std::string& label);

}  // namespace fuseopt
