#include "onnx_io/function_bodies.h"

#include <map>

namespace fuseopt {

static std::map<std::string, FunctionBodyBuilder>& registry() {
  static std::map<std::string, FunctionBodyBuilder> r;
  return r;
}

void register_function_body(const std::string& domain, const std::string& op, FunctionBodyBuilder b) {
  registry()[domain + "\x1f" + op] = std::move(b);
}

const FunctionBodyBuilder* find_function_body(const std::string& domain, const std::string& op) {
  auto it = registry().find(domain + "\x1f" + op);
  return it == registry().end() ? nullptr : &it->second;
}

std::vector<std::pair<std::string, std::string>> registered_function_bodies() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, b] : registry()) {
    const size_t sep = key.find('\x1f');
    out.emplace_back(key.substr(0, sep), key.substr(sep + 1));
  }
  return out;
}

static std::map<std::string, OverloadSelector>& overloads() {
  static std::map<std::string, OverloadSelector> r;
  return r;
}

void register_function_overload(const std::string& domain, const std::string& op, OverloadSelector s) {
  overloads()[domain + "\x1f" + op] = std::move(s);
}

std::string function_overload(const Graph& g, const Node& n) {
  auto it = overloads().find(n.domain + "\x1f" + n.op_type);
  return it == overloads().end() ? std::string() : it->second(g, n);
}

}  // namespace fuseopt
