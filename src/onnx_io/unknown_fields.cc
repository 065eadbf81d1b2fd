// The unknown-field check on load (unknown_fields.h): this build's ONNX schema
// (1.12, Debian's libonnx) extended at run time with the fields ONNX added up
// to 1.23, and a walk of the parsed model that decides about every unknown field.
#include "onnx_io/unknown_fields.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/unknown_field_set.h>
#include <onnx/onnx_pb.h>

#include <map>
#include <memory>
#include <string_view>
#include <vector>

#include "util/error.h"

namespace fuseopt {

namespace pb = google::protobuf;

namespace {

// What ONNX 1.13 to 1.23 added to onnx.proto, as FileDescriptorProto text (the
// fields of messages 1.12 has, and the messages it lacks). Checked against the
// onnx 1.23 package's descriptor (onnx.onnx_ml_pb2): these are every field and
// message it has that libonnx 1.12's classes lack. A newer ONNX adds here.
constexpr const char* kOnnxAdditions = R"pb(
  message_type { name: "NodeProto"
    field { name: "overload" number: 8 label: LABEL_OPTIONAL type: TYPE_STRING }
    field { name: "metadata_props" number: 9 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: "StringStringEntryProto" }
    field { name: "device_configurations" number: 10 label: LABEL_REPEATED type: TYPE_MESSAGE
            type_name: "NodeDeviceConfigurationProto" } }
  message_type { name: "ValueInfoProto"
    field { name: "metadata_props" number: 4 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: "StringStringEntryProto" } }
  message_type { name: "GraphProto"
    field { name: "metadata_props" number: 16 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: "StringStringEntryProto" } }
  message_type { name: "TensorProto"
    field { name: "metadata_props" number: 16 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: "StringStringEntryProto" } }
  message_type { name: "ModelProto"
    field { name: "configuration" number: 26 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: "DeviceConfigurationProto" } }
  message_type { name: "FunctionProto"
    field { name: "attribute_proto" number: 11 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: "AttributeProto" }
    field { name: "value_info" number: 12 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: "ValueInfoProto" }
    field { name: "overload" number: 13 label: LABEL_OPTIONAL type: TYPE_STRING }
    field { name: "metadata_props" number: 14 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: "StringStringEntryProto" } }
  message_type { name: "DeviceConfigurationProto"
    field { name: "name" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
    field { name: "num_devices" number: 2 label: LABEL_OPTIONAL type: TYPE_INT32 }
    field { name: "device" number: 3 label: LABEL_REPEATED type: TYPE_STRING } }
  message_type { name: "NodeDeviceConfigurationProto"
    field { name: "configuration_id" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
    field { name: "sharding_spec" number: 2 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: "ShardingSpecProto" }
    field { name: "pipeline_stage" number: 3 label: LABEL_OPTIONAL type: TYPE_INT32 } }
  message_type { name: "ShardingSpecProto"
    field { name: "tensor_name" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
    field { name: "device" number: 2 label: LABEL_REPEATED type: TYPE_INT64 }
    field { name: "index_to_device_group_map" number: 3 label: LABEL_REPEATED type: TYPE_MESSAGE
            type_name: "IntIntListEntryProto" }
    field { name: "sharded_dim" number: 4 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: "ShardedDimProto" } }
  message_type { name: "IntIntListEntryProto"
    field { name: "key" number: 1 label: LABEL_OPTIONAL type: TYPE_INT64 }
    field { name: "value" number: 2 label: LABEL_REPEATED type: TYPE_INT64 } }
  message_type { name: "ShardedDimProto"
    field { name: "axis" number: 1 label: LABEL_OPTIONAL type: TYPE_INT64 }
    field { name: "simple_sharding" number: 2 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: "SimpleShardedDimProto" } }
  message_type { name: "SimpleShardedDimProto"
    field { name: "dim_value" number: 1 label: LABEL_OPTIONAL type: TYPE_INT64 oneof_index: 0 }
    field { name: "dim_param" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING oneof_index: 0 }
    field { name: "num_shards" number: 3 label: LABEL_OPTIONAL type: TYPE_INT64 }
    oneof_decl { name: "dim" } }
)pb";

// Strings as bytes, in a message and its nested ones: the same wire format,
// and ONNX's strings are proto2, which no parser holds to UTF-8; but
// libprotobuf's reflection parse (DynamicMessage) logs an ERROR line to stderr
// for a string that is not UTF-8 (a metadata value, mutate_models.py seed 22
// m514 m992), a second stderr line beside fuseopt's one.
void strings_as_bytes(pb::DescriptorProto& m) {
  for (auto& f : *m.mutable_field())
    if (f.type() == pb::FieldDescriptorProto::TYPE_STRING) f.set_type(pb::FieldDescriptorProto::TYPE_BYTES);
  for (auto& nested : *m.mutable_nested_type()) strings_as_bytes(nested);
}

// The newest schema fuseopt reads: this build's onnx.proto with the additions
// merged in, in a pool of its own (the generated classes' pool cannot grow).
// Its messages parse the additions' bytes (as DynamicMessages).
struct NewerSchema {
  pb::DescriptorPool pool;
  mutable pb::DynamicMessageFactory factory{&pool};  // GetPrototype is not const (it caches; thread-safe)
  NewerSchema() {
    pb::FileDescriptorProto file, additions;
    onnx::ModelProto::descriptor()->file()->CopyTo(&file);
    FUSE_CHECK(pb::TextFormat::ParseFromString(kOnnxAdditions, &additions), "internal: ONNX schema additions");
    for (const auto& add : additions.message_type()) {
      pb::DescriptorProto* into = nullptr;
      for (auto& m : *file.mutable_message_type())
        if (m.name() == add.name()) into = &m;
      if (!into) {
        *file.add_message_type() = add;
        continue;
      }
      for (const auto& f : add.field())
        if (!onnx::ModelProto::descriptor()->file()->FindMessageTypeByName(add.name())->FindFieldByNumber(f.number()))
          *into->add_field() = f;  // a libonnx that has it already keeps its own
    }
    for (auto& m : *file.mutable_message_type()) strings_as_bytes(m);
    FUSE_CHECK(pool.BuildFile(file), "internal: ONNX schema additions do not build");
  }
  static const NewerSchema& get() {
    static const NewerSchema s;
    return s;
  }
};

// Where in the model a message is, as a chain up to the model: rendered only
// for a refusal ("graph.node[3] ('Conv_3', Conv).attribute[0]").
struct Path {
  const Path* parent = nullptr;
  std::string_view field;  // a descriptor's field name (lives as long as the pool); empty for the model
  int index = -1;     // element of a repeated field
  const pb::Message* msg = nullptr;
  std::string str() const {
    if (!parent) return "the model";
    std::string s = parent->parent ? parent->str() + "." : "";
    s += std::string(field);
    if (index >= 0) s += "[" + std::to_string(index) + "]";
    if (const auto* n = dynamic_cast<const onnx::NodeProto*>(msg))
      s += " (" + (n->name().empty() ? std::string() : quoted(n->name()) + ", ") + printable(n->op_type()) + ")";
    return s;
  }
};

using UF = pb::UnknownField;

const char* wire_name(UF::Type t) {
  switch (t) {
    case UF::TYPE_VARINT: return "varint";
    case UF::TYPE_FIXED32: return "32-bit";
    case UF::TYPE_FIXED64: return "64-bit";
    case UF::TYPE_LENGTH_DELIMITED: return "length-delimited";
    case UF::TYPE_GROUP: return "group";
  }
  return "?";
}

// The wire type a field is written with (a repeated number may also come
// packed, length-delimited).
UF::Type wire_type(const pb::FieldDescriptor* f) {
  using FD = pb::FieldDescriptor;
  switch (f->type()) {
    case FD::TYPE_FIXED64: case FD::TYPE_SFIXED64: case FD::TYPE_DOUBLE: return UF::TYPE_FIXED64;
    case FD::TYPE_FIXED32: case FD::TYPE_SFIXED32: case FD::TYPE_FLOAT: return UF::TYPE_FIXED32;
    case FD::TYPE_STRING: case FD::TYPE_BYTES: case FD::TYPE_MESSAGE: return UF::TYPE_LENGTH_DELIMITED;
    case FD::TYPE_GROUP: return UF::TYPE_GROUP;
    default: return UF::TYPE_VARINT;
  }
}

bool wire_type_fits(const pb::FieldDescriptor* f, UF::Type t) {
  return t == wire_type(f) || (f->is_packable() && t == UF::TYPE_LENGTH_DELIMITED);
}

class Walker {
 public:
  explicit Walker(const std::string& label) : label_(label), schema_(NewerSchema::get()) {}

  void message(const pb::Message& m, const Path& at) {
    const pb::Reflection* r = m.GetReflection();
    if (const auto& u = r->GetUnknownFields(m); !u.empty()) unknown(u, m.GetDescriptor(), at);
    std::vector<const pb::FieldDescriptor*> fields;
    r->ListFields(m, &fields);
    for (const auto* f : fields) {
      if (f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) continue;
      if (!f->is_repeated()) {
        const auto& sub = r->GetMessage(m, f);
        message(sub, Path{&at, f->name(), -1, &sub});
        continue;
      }
      for (int i = 0, n = r->FieldSize(m, f); i < n; ++i) {
        const auto& sub = r->GetRepeatedMessage(m, f, i);
        message(sub, Path{&at, f->name(), i, &sub});
      }
    }
  }

 private:
  // `what` continues the location: ": field 2 ..." or " (... ) does not parse ...".
  [[noreturn]] void damaged(const Path& at, const std::string& what) const {
    throw Error(label_ + ": damaged protobuf: " + at.str() + what);
  }

  // `d`: the message's descriptor, this build's (a generated class) or the
  // newer schema's (a DynamicMessage parsed from an addition's bytes).
  void unknown(const pb::UnknownFieldSet& u, const pb::Descriptor* d, const Path& at) {
    const pb::Descriptor* newer = schema_.pool.FindMessageTypeByName(d->full_name());
    std::map<int, int> seen;  // field number -> occurrences so far: the index in a repeated field
    for (int i = 0; i < u.field_count(); ++i) {
      const UF& uf = u.field(i);
      const int number = uf.number(), k = seen[number]++;
      const std::string field = "field " + std::to_string(number);
      if (const auto* f = d->FindFieldByNumber(number)) {
        // The parser put a field it knows here: another wire type (a damaged
        // tag), or an enum value the enum lacks (a closed proto2 enum).
        if (uf.type() == UF::TYPE_VARINT && f->enum_type())
          damaged(at, ": " + field + " (" + f->name() + ") has value " + std::to_string(uf.varint()) + ", which " +
                          f->enum_type()->full_name() + " does not define");
        damaged(at, ": " + field + " (" + f->name() + ") has wire type " + wire_name(uf.type()) + ", expected " +
                        wire_name(wire_type(f)));
      }
      const pb::FieldDescriptor* f = newer ? newer->FindFieldByNumber(number) : nullptr;
      // Neither this build nor any ONNX through IR 14 defines it: a field of
      // a newer ONNX, a producer's extension, or damage that still made a
      // well-formed field. Kept, as before (tests/py/test_model_preservation.py
      // keeps such fields byte for byte): its bytes parsed, and every protobuf
      // reader, Python's and ONNX Runtime's included, skips a field it does not
      // know, so the output stays readable; refusing it would refuse models
      // onnx.checker and ONNX Runtime take. It is kept where fuseopt keeps the
      // message and dropped where it rebuilds it.
      if (!f) continue;
      if (!wire_type_fits(f, uf.type()))
        damaged(at, ": " + field + " (" + f->name() + ") has wire type " + wire_name(uf.type()) + ", expected " + wire_name(wire_type(f)));
      if (f->type() != pb::FieldDescriptor::TYPE_MESSAGE) continue;
      std::unique_ptr<pb::Message> sub(schema_.factory.GetPrototype(f->message_type())->New());
      const Path sub_at{&at, f->name(), f->is_repeated() ? k : -1, sub.get()};
      if (!sub->ParseFromString(uf.length_delimited()))
        damaged(sub_at, " (" + d->name() + " " + field + ") is not a well-formed " + f->message_type()->name());
      message(*sub, sub_at);
    }
  }

  const std::string& label_;
  const NewerSchema& schema_;
};

}  // namespace

void check_unknown_fields(const onnx::ModelProto& model, const std::string& label) {
  Walker(label).message(model, Path{nullptr, "", -1, &model});
}

}  // namespace fuseopt
