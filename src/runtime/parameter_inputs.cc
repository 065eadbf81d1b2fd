#include "runtime/parameter_inputs.h"

#include <map>
#include <mutex>

namespace fuseopt {

namespace {
std::map<std::string, std::vector<int>>& table() {
  static std::map<std::string, std::vector<int>> t;
  return t;
}
std::mutex& table_mutex() {
  static std::mutex m;
  return m;
}
}  // namespace

void register_fp32_parameter_inputs(const std::string& op, std::vector<int> inputs) {
  std::lock_guard<std::mutex> lock(table_mutex());
  table()[op] = std::move(inputs);
}

const std::vector<int>& fp32_parameter_inputs(const std::string& op) {
  static const std::vector<int> none;
  std::lock_guard<std::mutex> lock(table_mutex());
  auto it = table().find(op);
  return it == table().end() ? none : it->second;
}

}  // namespace fuseopt
