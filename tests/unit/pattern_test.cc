#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "pass/fusion_report.h"
#include "pass/pass.h"
#include "pass/pass_manager.h"
#include "rewrite/pattern.h"
#include "rewrite/rewriter.h"
#include "support/graph_builder.h"
#include "util/error.h"

using namespace fuseopt;
using fuseopt::test::GraphBuilder;

namespace {
Node* producer(Value* v) { return v->producer; }
}  // namespace

TEST_CASE("pattern: Relu(Add) matches and captures nodes and values") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {2, 3});
  Value* y = b.input("y", DType::Float, {2, 3});
  Value* s = b.op("Add", {x, y}, {}, "add");
  Value* r = b.op("Relu", {s}, {}, "relu");
  b.output(r);
  Pattern p = Op("Relu", Op("Add", "a", "b").as("add")).as("relu");
  MatchResult m = match_pattern(p, producer(r));
  REQUIRE(m);
  CHECK(m.match->root == producer(r));
  CHECK(m.match->node("add") == producer(s));
  CHECK(m.match->value("add") == s);
  CHECK(m.match->value("a") == x);
  CHECK(m.match->value("b") == y);
  REQUIRE(m.match->matched.size() == 2);
  CHECK(m.match->matched[0] == producer(r));
  // The same pattern does not match at the Add.
  MatchResult at_add = match_pattern(p, producer(s));
  CHECK_FALSE(at_add);
  CHECK(at_add.reason.find("expected Relu") != std::string::npos);
}

TEST_CASE("pattern: a constant operand matches in either order only when commutative") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {4});
  Value* c = b.constant("c", Tensor::from_floats({1, 2, 3, 4}, {4}));
  Value* s = b.op("Add", {c, x});
  b.output(s);
  Pattern plain = Op("Add", "x", Const("bias"));
  MatchResult m1 = match_pattern(plain, producer(s));
  CHECK_FALSE(m1);
  CHECK(m1.reason.find("expected a constant for 'bias'") != std::string::npos);
  MatchResult m2 = match_pattern(Op("Add", "x", Const("bias")).commutative(), producer(s));
  REQUIRE(m2);
  CHECK(m2.match->value("x") == x);
  CHECK(m2.match->value("bias") == c);
}

TEST_CASE("pattern: a name bound twice must bind the same value (DAG patterns)") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {2, 8});
  Value* z = b.input("z", DType::Float, {2, 8});
  Value* mean = b.op("ReduceMean", {x}, {Attribute::make_ints("axes", {-1})});
  Value* good = b.op("Sub", {x, mean}, {}, "good");
  Value* bad = b.op("Sub", {z, mean}, {}, "bad");
  b.output(good);
  b.output(bad);
  Pattern xp = Any("x");
  Pattern p = Op("Sub", xp, Op("ReduceMean", xp).attr_is("axes", std::vector<int64_t>{-1}).as("mean"));
  CHECK(match_pattern(p, producer(good)));
  MatchResult r = match_pattern(p, producer(bad));
  CHECK_FALSE(r);
  CHECK(r.reason.find("'x' is bound to 'z'") != std::string::npos);
}

TEST_CASE("pattern: commutative choices backtrack when a later sibling fails") {
  GraphBuilder b;
  Value* p = b.input("p", DType::Float, {3});
  Value* q = b.input("q", DType::Float, {3});
  Value* s = b.op("Add", {p, q});
  Value* m = b.op("Mul", {s, p});
  b.output(m);
  // First order binds a=p, b=q; then Mul's second input p != b: must retry with a=q, b=p.
  Pattern pat = Op("Mul", Op("Add", "a", "b").commutative(), "b");
  MatchResult r = match_pattern(pat, producer(m));
  REQUIRE(r);
  CHECK(r.match->value("a") == q);
  CHECK(r.match->value("b") == p);
}

TEST_CASE("pattern: optional nodes, alternatives and op-type sets") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {3});
  Value* s = b.input("s", DType::Float, {3});
  Value* cast = b.op("Cast", {x}, {Attribute::make_int("to", 1)});
  Value* r1 = b.op("Relu", {cast}, {}, "with_cast");
  Value* r2 = b.op("Relu", {x}, {}, "without_cast");
  Value* div = b.op("Div", {x, s});
  Value* rec = b.op("Reciprocal", {s});
  Value* mul = b.op("Mul", {x, rec});
  for (Value* v : {r1, r2, div, mul}) b.output(v);

  Pattern opt = Op("Relu", Op("Cast", "x").as("cast").optional());
  MatchResult a = match_pattern(opt, producer(r1));
  REQUIRE(a);
  CHECK(a.match->node("cast") == producer(cast));
  CHECK(a.match->value("x") == x);
  MatchResult c = match_pattern(opt, producer(r2));
  REQUIRE(c);
  CHECK(c.match->node("cast") == nullptr);
  CHECK(c.match->value("x") == x);
  CHECK(c.match->matched.size() == 1);

  Pattern scaled = AnyOf({Op("Div", "x", "s"), Op("Mul", "x", Op("Reciprocal", "s"))});
  MatchResult d = match_pattern(scaled, producer(div));
  REQUIRE(d);
  CHECK(d.match->value("s") == s);
  MatchResult e = match_pattern(scaled, producer(mul));
  REQUIRE(e);
  CHECK(e.match->value("s") == s);
  CHECK(e.match->matched.size() == 2);

  CHECK(match_pattern(Op("Div|Mul", "x", Any()), producer(div)));
  CHECK(match_pattern(Op("Div|Mul", "x", Any()), producer(mul)));
  CHECK_FALSE(match_pattern(Op("Div|Sub", "x", Any()), producer(mul)));
}

TEST_CASE("pattern: optional node at the root starts from the root through its input") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {3});
  Value* g = b.constant("gamma", Tensor::from_floats({1, 2, 3}, {3}));
  Value* beta = b.constant("beta", Tensor::from_floats({0, 0, 1}, {3}));
  Value* mul = b.op("Mul", {x, g});
  Value* add = b.op("Add", {mul, beta});
  b.output(add);
  Pattern p = Op("Add", Op("Mul", "x", Const("gamma")).as("scale"), Const("beta")).as("shift").optional();
  MatchResult full = match_pattern(p, producer(add));
  REQUIRE(full);
  CHECK(full.match->node("shift") == producer(add));
  CHECK(full.match->value("beta") == beta);
  // Rooted at the Mul: the absent Add route matches, root is the Mul.
  MatchResult part = match_pattern(p, producer(mul));
  REQUIRE(part);
  CHECK(part.match->root == producer(mul));
  CHECK(part.match->value("beta") == nullptr);
}

TEST_CASE("pattern: attributes, output index, input counts, constants with values") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {2, 6});
  Node* split = b.node("Split", {x}, 3, {Attribute::make_int("axis", -1)});
  Value* two = b.scalar("two", 2.0f);
  Value* three = b.scalar("three", 3.0f);
  Value* p2 = b.op("Pow", {split->outputs[1], two});
  Value* p3 = b.op("Pow", {split->outputs[1], three});
  b.output(p2);
  b.output(p3);
  b.output(split->outputs[0]);
  b.output(split->outputs[2]);
  Pattern pat = Op("Pow", Op("Split", "x").attr_is("axis", int64_t{-1}).out(1).as_node("split"),
                   Const("e").equals(2.0));
  MatchResult r = match_pattern(pat, producer(p2));
  REQUIRE(r);
  CHECK(r.match->node("split") == split);
  CHECK(r.match->value("split") == nullptr);  // as_node captures no value
  MatchResult r3 = match_pattern(pat, producer(p3));
  CHECK_FALSE(r3);
  CHECK(r3.reason.find("not a constant equal to 2") != std::string::npos);
  CHECK_FALSE(match_pattern(Op("Pow", Op("Split", "x").out(0), Any()), producer(p2)));
  CHECK(match_pattern(Op("Pow", Op("Split", "x").any_out(), Any()), producer(p2)));
  CHECK_FALSE(match_pattern(Op("Pow", Op("Split", "x").attr_is("axis", int64_t{0}).out(1), Any()), producer(p2)));
  // Pow has two inputs: a one-input pattern needs allow_extra_inputs().
  CHECK_FALSE(match_pattern(Op("Pow", Any()), producer(p2)));
  CHECK(match_pattern(Op("Pow", Any()).allow_extra_inputs(), producer(p2)));
  CHECK(is_scalar_const(two));
  CHECK(scalar_value(three).value() == 3.0);
}

TEST_CASE("legality rule 1: interior values must stay private to the match") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {3});
  Value* y = b.input("y", DType::Float, {3});
  Value* s = b.op("Add", {x, y}, {}, "add");
  Value* r = b.op("Relu", {s}, {}, "relu");
  Value* other = b.op("Neg", {s}, {}, "neg");
  b.output(r);
  b.output(other);
  Pattern p = Op("Relu", Op("Add", "a", "b").as("add"));
  MatchResult m = match_pattern(p, producer(r));
  REQUIRE(m);
  Status st = check_interior_private(*m.match);
  REQUIRE_FALSE(st);
  CHECK(st.reason() == "rule 1: interior value 'add_y' of Add 'add' is also read by Neg 'neg' outside the match");
  CHECK(check_interior_private(*m.match, {s}));

  GraphBuilder b2;
  Value* x2 = b2.input("x", DType::Float, {3});
  Value* s2 = b2.op("Add", {x2, x2}, {}, "add");
  Value* r2 = b2.op("Relu", {s2}, {}, "relu");
  b2.output(r2);
  b2.output(s2);
  MatchResult m2 = match_pattern(p, producer(r2));
  REQUIRE(m2);
  Status st2 = check_interior_private(*m2.match);
  REQUIRE_FALSE(st2);
  CHECK(st2.reason().find("is a graph output") != std::string::npos);
}

TEST_CASE("rewriter: replace_match keeps graph-output names and erases the chain") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {3});
  Value* y = b.input("y", DType::Float, {3});
  Value* s = b.op("Add", {x, y}, {}, "add");
  Value* r = b.op("Relu", {s}, {}, "relu");
  b.output(r);
  r->dtype = DType::Float;
  Graph& g = b.graph();
  std::string out_name = r->name;
  MatchResult m = match_pattern(Op("Relu", Op("Add", "a", "b")), producer(r));
  REQUIRE(m);
  Rewriter rw(g);
  rw.set_insertion_point(m.match->root);
  Node* f = rw.create_node("fuseopt", "AddRelu", {m.match->value("a"), m.match->value("b")});
  rw.replace_match(*m.match, f, "AddRelu");
  rw.topo_sort();
  rw.verify();
  REQUIRE(g.num_nodes() == 1);
  CHECK(g.outputs[0]->producer == f);
  CHECK(g.outputs[0]->name == out_name);
  CHECK(g.outputs[0]->dtype == DType::Float);
  CHECK(g.opset("fuseopt") == 1);
  CHECK(rw.counts().nodes_created == 1);
  CHECK(rw.counts().nodes_erased == 2);
  REQUIRE(rw.fused_origins().count(f->name));
  CHECK(rw.fused_origins().at(f->name).replaced_ops == std::vector<std::string>{"Add", "Relu"});
  CHECK(f->doc_string == "fuseopt AddRelu: Add+Relu");
}

TEST_CASE("rewriter: replace_with_constant keeps the name of a graph output") {
  GraphBuilder b;
  Value* c = b.constant("c", Tensor::from_floats({1, -2}, {2}));
  Value* r = b.op("Relu", {c}, {}, "relu");
  b.output(r);
  Graph& g = b.graph();
  std::string name = r->name;
  Rewriter rw(g);
  Value* k = rw.replace_with_constant(r, Tensor::from_floats({1, 0}, {2}));
  CHECK(g.num_nodes() == 0);
  CHECK(k->name == name);
  CHECK(g.outputs[0] == k);
  CHECK(k->is_graph_output);
  rw.verify();
}

namespace {
// A test-only fusion: Neg(Neg(x)) -> x via Identity-free rewiring, with a check.
class DoubleNegTestPass : public FusionPass {
 public:
  std::string name() const override { return "TestDoubleNeg"; }
  Pattern pattern() const override { return Op("Neg", Op("Neg", "x").as("inner")).as("outer"); }
  Status check(const Graph& g, const Match& m) const override {
    if (m.value("x")->dtype != DType::Float) return Status::reject("rule 5: ", m.node("inner")->label(), " is not float");
    return Status::ok();
  }
  void rewrite(const Match& m, Rewriter& rw) const override {
    Node* f = rw.create_node("", "Identity", {m.value("x")});
    rw.replace_match(m, f, name());
  }
};
}  // namespace
FUSEOPT_REGISTER_PASS(DoubleNegTestPass, PassCategory::Fusion, 10000);

TEST_CASE("pass manager: runs a registered fusion, reports matches and rejections") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {3});
  Value* i = b.input("i", DType::Int32, {3});
  Value* a = b.op("Neg", {b.op("Neg", {x}, {}, "n1")}, {}, "n2");
  Value* c = b.op("Neg", {b.op("Neg", {i}, {}, "n3")}, {}, "n4");
  Value* shared = b.op("Neg", {x}, {}, "n5");
  Value* d = b.op("Neg", {shared}, {}, "n6");
  Value* e = b.op("Relu", {shared}, {}, "r");
  for (Value* v : {a, c, d, e}) b.output(v);
  Graph& g = b.graph();

  REQUIRE(find_pass("TestDoubleNeg"));
  PassManagerOptions o;
  o.only = {"TestDoubleNeg"};
  PassManager pm(o);
  REQUIRE(pm.passes().size() == 1);
  FusionReport rep;
  pm.run(g, rep);
  const PatternStats* st = rep.pattern("TestDoubleNeg");
  REQUIRE(st);
  CHECK(st->matched == 1);
  CHECK(st->rejected == 2);
  REQUIRE(st->reasons.size() == 2);
  std::string all = st->reasons[0] + "\n" + st->reasons[1];
  CHECK(all.find("rule 5: Neg 'n3' is not float") != std::string::npos);
  CHECK(all.find("rule 1: interior value") != std::string::npos);
  CHECK(all.find("Relu 'r'") != std::string::npos);
  CHECK(rep.nodes_before() == 7);
  CHECK(rep.nodes_after() == 6);
  CHECK(rep.fixed_point());
  std::string json = rep.to_json();
  // Parsed, not string-matched: the writer's spacing is nlohmann-json's business.
  const nlohmann::json js = nlohmann::json::parse(json);
  bool found = false;
  for (const auto& p : js.at("patterns"))
    if (p.at("name") == "TestDoubleNeg") {
      found = true;
      CHECK(p.at("matched") == 1);
      CHECK(p.at("rejected") == 2);
    }
  CHECK(found);
  CHECK(rep.to_table().find("TestDoubleNeg") != std::string::npos);
}

TEST_CASE("pass manager: unknown names are errors; none runs nothing") {
  PassManagerOptions o;
  o.only = {"NoSuchPass"};
  REQUIRE_THROWS_AS(PassManager(o), Error);
  PassManagerOptions d;
  d.disabled = {"AlsoMissing"};
  REQUIRE_THROWS_WITH(PassManager(d), Catch::Contains("--disable: unknown pass 'AlsoMissing'"));
  PassManagerOptions n;
  n.only = {"none"};
  CHECK(PassManager(n).passes().empty());
  CHECK(split_pass_list(" a, b ,,c ") == std::vector<std::string>{"a", "b", "c"});
}

TEST_CASE("report: JSON escapes and counts ops") {
  CHECK(json_quote("a\"b\\c\n") == "\"a\\\"b\\\\c\\n\"");
  CHECK(json_quote(std::string("x\xff\xc3\xa9")) == "\"x?\xc3\xa9\"");  // bad byte -> '?', UTF-8 kept
}

TEST_CASE("rewriter: using a value erased by an earlier rewrite is a clear internal error") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {3});
  Value* a = b.op("Relu", {x}, {}, "relu");
  Value* n = b.op("Neg", {a}, {}, "neg");
  b.output(n);
  Graph& g = b.graph();
  Rewriter rw(g);
  rw.replace_all_uses(a, x);
  rw.erase_node(producer(a));
  REQUIRE_THROWS_WITH(rw.create_node("", "Abs", {a}), Catch::Contains("stale Value*"));
  REQUIRE_THROWS_WITH(rw.set_input(producer(n), 0, a), Catch::Contains("stale Value*"));
  rw.verify();
}

TEST_CASE("report: a candidate rejected first and fused later counts as matched only") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {3});
  Value* r = b.op("Relu", {x}, {}, "root");
  b.output(r);
  FusionReport rep;
  rep.record_rejection("P", *producer(r), "rule 1: something");
  rep.record_rejection("P", *producer(r), "rule 1: something");  // same again: counted once
  REQUIRE(rep.pattern("P")->rejected == 1);
  rep.record_match("P", *producer(r));
  CHECK(rep.pattern("P")->rejected == 0);
  CHECK(rep.pattern("P")->reasons.empty());
  CHECK(rep.pattern("P")->matched == 1);
}

TEST_CASE("report: withdraw_rejections drops a node's rejections without counting a match") {
  GraphBuilder b;
  Value* x = b.input("x", DType::Float, {3});
  Value* r = b.op("Relu", {x}, {}, "root");
  Value* s = b.op("Relu", {r}, {}, "other");
  b.output(s);
  FusionReport rep;
  rep.record_rejection("P", *producer(r), "rule 7: one");
  rep.record_rejection("P", *producer(r), "rule 7: two");
  rep.record_rejection("P", *producer(s), "rule 7: three");
  REQUIRE(rep.pattern("P")->rejected == 3);
  rep.withdraw_rejections("P", "root");
  CHECK(rep.pattern("P")->rejected == 1);
  REQUIRE(rep.pattern("P")->reasons.size() == 1);
  CHECK(rep.pattern("P")->reasons[0].find("three") != std::string::npos);
  CHECK(rep.pattern("P")->matched == 0);
}
