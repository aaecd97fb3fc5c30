// The hook table's lookups (cuda_hook_table.hpp).
#include "common/cuda_hook_table.hpp"

#include <set>

namespace aoti_cuda::common::hooks {

int find_hook(const std::string& name) noexcept {
  for (std::size_t i = 0; i < kHooks.size(); ++i) {
    if (name == kHooks[i].import) return static_cast<int>(i);
  }
  return -1;
}

std::vector<std::string> hooked_imports(const std::vector<std::string>& undefined_symbols) {
  std::set<std::string> out;
  for (const std::string& s : undefined_symbols) {
    std::string base = s.substr(0, s.find('@'));
    if (find_hook(base) >= 0) out.insert(std::move(base));
  }
  return {out.begin(), out.end()};
}

std::vector<std::string> bypass_warnings(const std::vector<std::string>& undefined_symbols) {
  std::vector<std::string> out;
  for (const Bypass& b : kBypasses) {
    for (const std::string& s : undefined_symbols) {
      if (s.substr(0, s.find('@')) == b.import) {
        out.push_back(std::string("imports ") + b.import + ": " + b.consequence);
        break;
      }
    }
  }
  return out;
}

}  // namespace aoti_cuda::common::hooks
