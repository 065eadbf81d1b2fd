// Unknown protobuf fields on load (src/onnx_io/unknown_fields.h): damage that
// this build's ONNX classes parse as unknown fields is refused in one line
// naming the file and where (also under --no-validate); the fields ONNX added
// after libonnx 1.12, and well-formed fields no ONNX defines, load and are
// written back as they came.
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/unknown_field_set.h>

#include <catch2/catch.hpp>

#include "onnx_io/onnx_io.h"
#include "onnx_io/unknown_fields.h"
#include "support/model_proto.h"
#include "util/error.h"

using namespace fuseopt;
using namespace fuseopt::test;
using google::protobuf::UnknownFieldSet;

namespace {

// y = Relu(x), node 'relu'.
onnx::ModelProto relu_model() {
  auto m = model_proto();
  add_node(m, "Relu", {"x"}, {"y"}, "relu");
  return m;
}

UnknownFieldSet* unknown(google::protobuf::Message& m) { return m.GetReflection()->MutableUnknownFields(&m); }
const UnknownFieldSet& unknown(const google::protobuf::Message& m) { return m.GetReflection()->GetUnknownFields(m); }

// The bytes of field `number` in an unknown field set ("" when absent).
std::string bytes_of(const google::protobuf::Message& m, int number) {
  const auto& u = unknown(m);
  for (int i = 0; i < u.field_count(); ++i)
    if (u.field(i).number() == number) return u.field(i).length_delimited();
  return "";
}

LoadOptions no_validate() {
  LoadOptions o;
  o.validate = false;
  return o;
}

std::unique_ptr<Graph> load(const onnx::ModelProto& m, const LoadOptions& o = {}) {
  return load_model_from_bytes(m.SerializeAsString(), ".", "m.onnx", o);
}

// A StringStringEntryProto {key: "k", value: "v"}, and the same with its value's
// tag 0x12 flipped to 0x91 (mutation s20 m709's form: the tag becomes a
// two-byte varint of a 64-bit field that runs past the entry's end).
const std::string kEntry("\x0a\x01k\x12\x01v", 6);
const std::string kDamagedEntry("\x0a\x01k\x91\x01v", 6);

}  // namespace

TEST_CASE("unknown fields: a damaged metadata_props entry (s20 m709) is refused in one line, also under --no-validate") {
  auto m = relu_model();
  unknown(*m.mutable_graph())->AddLengthDelimited(16, kDamagedEntry);  // GraphProto.metadata_props, IR 10
  const std::string want =
      "m.onnx: damaged protobuf: graph.metadata_props[0] (GraphProto field 16) is not a well-formed StringStringEntryProto";
  REQUIRE_THROWS_WITH(load(m), want);
  REQUIRE_THROWS_WITH(load(m, no_validate()), want);
  // The well-formed entry loads and is written back.
  auto ok = relu_model();
  unknown(*ok.mutable_graph())->AddLengthDelimited(16, kEntry);
  onnx::ModelProto out;
  REQUIRE(out.ParseFromString(serialize_model(*load(ok))));
  CHECK(bytes_of(out.graph(), 16) == kEntry);
  // The second entry is named by its index; a node's entry names the node.
  auto second = relu_model();
  unknown(*second.mutable_graph())->AddLengthDelimited(16, kEntry);
  unknown(*second.mutable_graph())->AddLengthDelimited(16, kDamagedEntry);
  REQUIRE_THROWS_WITH(load(second), Catch::Contains("graph.metadata_props[1] (GraphProto field 16)"));
  auto node = relu_model();
  unknown(*node.mutable_graph()->mutable_node(0))->AddLengthDelimited(9, kDamagedEntry);
  REQUIRE_THROWS_WITH(load(node), "m.onnx: damaged protobuf: graph.node[0] ('relu', Relu).metadata_props[0] "
                                  "(NodeProto field 9) is not a well-formed StringStringEntryProto");
}

TEST_CASE("unknown fields: a field number with another wire type, or an enum value the enum lacks, is damage") {
  auto m = relu_model();
  unknown(*m.mutable_graph()->mutable_node(0))->AddVarint(4, 7);  // op_type as a varint: a damaged tag
  REQUIRE_THROWS_WITH(load(m), "m.onnx: damaged protobuf: graph.node[0] ('relu', Relu): field 4 (op_type) has wire "
                               "type varint, expected length-delimited");
  // A field ONNX added later (NodeProto.metadata_props) is held to its wire type too.
  auto newer = relu_model();
  unknown(*newer.mutable_graph()->mutable_node(0))->AddFixed32(9, 1);
  REQUIRE_THROWS_WITH(load(newer, no_validate()), Catch::Contains("field 9 (metadata_props) has wire type 32-bit, "
                                                                  "expected length-delimited"));
  auto attr = relu_model();
  auto* a = attr_int(attr.mutable_graph()->mutable_node(0), "k", 1);
  unknown(*a)->AddVarint(20, 99);  // AttributeProto.type = 99: parsed into the unknown fields
  REQUIRE_THROWS_WITH(load(attr), "m.onnx: damaged protobuf: graph.node[0] ('relu', Relu).attribute[0]: field 20 "
                                  "(type) has value 99, which onnx.AttributeProto.AttributeType does not define");
  // Inside a message of a later ONNX (ModelProto.configuration, IR 11: a
  // DeviceConfigurationProto), its own fields' wire types are checked.
  auto config = relu_model();
  unknown(config)->AddLengthDelimited(26, std::string("\x12\x01x", 3));  // num_devices as a string
  REQUIRE_THROWS_WITH(load(config), "m.onnx: damaged protobuf: configuration[0]: field 2 (num_devices) has wire type "
                                    "length-delimited, expected varint");
}

TEST_CASE("unknown fields: the fields ONNX added after libonnx 1.12 load and are written back") {
  auto m = relu_model();
  auto* node = m.mutable_graph()->mutable_node(0);
  unknown(*node)->AddLengthDelimited(8, "variant");  // NodeProto.overload
  unknown(*node)->AddLengthDelimited(9, kEntry);     // NodeProto.metadata_props
  unknown(*m.mutable_graph())->AddLengthDelimited(16, kEntry);
  const std::string config("\x0a\x01" "d\x10\x02\x1a\x04" "cpu0", 11);  // {name: "d", num_devices: 2, device: "cpu0"}
  unknown(m)->AddLengthDelimited(26, config);  // ModelProto.configuration
  // A model-local function with an attribute default (FunctionProto.attribute_proto, IR 9).
  import_opset(m, "custom", 1);
  auto* f = m.add_functions();
  f->set_name("Twice");
  f->set_domain("custom");
  f->add_input("a");
  f->add_output("b");
  auto* fo = f->add_opset_import();
  fo->set_version(17);
  auto* body = f->add_node();
  body->set_op_type("Add");
  body->add_input("a");
  body->add_input("a");
  body->add_output("b");
  onnx::AttributeProto alpha;
  alpha.set_name("alpha");
  alpha.set_type(onnx::AttributeProto::FLOAT);
  alpha.set_f(2.0f);
  unknown(*f)->AddLengthDelimited(11, alpha.SerializeAsString());
  node->set_output(0, "r");
  add_node(m, "Twice", {"r"}, {"y"}, "call", "custom");

  onnx::ModelProto out;
  REQUIRE(out.ParseFromString(serialize_model(*load(m))));
  CHECK(bytes_of(out.graph().node(0), 8) == "variant");
  CHECK(bytes_of(out.graph().node(0), 9) == kEntry);
  CHECK(bytes_of(out.graph(), 16) == kEntry);
  CHECK(bytes_of(out, 26) == config);
  REQUIRE(out.functions_size() == 1);
  CHECK(bytes_of(out.functions(0), 11) == alpha.SerializeAsString());
  CHECK_NOTHROW(check_unknown_fields(out, "out.onnx"));
  // The same attribute_proto with its bytes cut short is refused.
  auto cut = m;
  unknown(*cut.mutable_functions(0))->mutable_field(0)->mutable_length_delimited()->pop_back();
  REQUIRE_THROWS_WITH(load(cut), "m.onnx: damaged protobuf: functions[0].attribute_proto[0] (FunctionProto field 11) "
                                 "is not a well-formed AttributeProto");
}

TEST_CASE("unknown fields: a well-formed field no ONNX through IR 14 defines is kept, with or without validation") {
  auto m = relu_model();
  unknown(*m.mutable_graph()->mutable_node(0))->AddVarint(100, 1);
  for (const LoadOptions& o : {LoadOptions{}, no_validate()}) {
    onnx::ModelProto out;
    REQUIRE(out.ParseFromString(serialize_model(*load(m, o))));
    REQUIRE(unknown(out.graph().node(0)).field_count() == 1);
    CHECK(unknown(out.graph().node(0)).field(0).number() == 100);
  }
  // Inside a later ONNX's message too (DeviceConfigurationProto field 7).
  auto config = relu_model();
  const std::string with_7("\x38\x01", 2);
  unknown(config)->AddLengthDelimited(26, with_7);
  onnx::ModelProto out;
  REQUIRE(out.ParseFromString(serialize_model(*load(config))));
  CHECK(bytes_of(out, 26) == with_7);
}

TEST_CASE("unknown fields: a metadata value that is not UTF-8 loads without a libprotobuf log line (s22 m514)") {
  // proto2 strings: no parser holds them to UTF-8, and the check's own parse
  // must not log (its stderr line beside fuseopt's one was a bad rejection).
  static std::vector<std::string> logged;
  auto* previous = google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel, const char*, int, const std::string& message) { logged.push_back(message); });
  auto m = relu_model();
  const std::string entry("\x0a\x01k\x12\x02\xff\xfe", 7);  // value: 0xff 0xfe
  unknown(*m.mutable_graph()->mutable_node(0))->AddLengthDelimited(9, entry);
  onnx::ModelProto out;
  const bool parsed = out.ParseFromString(serialize_model(*load(m)));
  google::protobuf::SetLogHandler(previous);
  REQUIRE(parsed);
  CHECK(bytes_of(out.graph().node(0), 9) == entry);
  CHECK(logged.empty());
}
