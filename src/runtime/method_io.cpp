// MethodMeta's names and dynamic dimensions. A method input or output is a
// value of the method; a delegate sees it at some position of its argument
// list (DelegateSpec::args: inputs, then outputs). The name and the dynamic
// dimensions come from the first delegate that takes the value directly.
#include <algorithm>
#include <map>

#include "format/aoti_facts.hpp"
#include "runtime/method.hpp"

namespace aoti_cuda::runtime {
namespace {

struct Position {
  const Delegate* delegate = nullptr;
  std::size_t index = 0;  // among the delegate's inputs (or outputs)
};

Position find_position(const Method& m, int32_t value, bool output) {
  for (const auto& d : m.delegates) {
    const std::vector<int32_t>& args = d->spec->args;
    const std::size_t first = output ? d->n_in : 0, last = output ? args.size() : std::min(d->n_in, args.size());
    for (std::size_t i = first; i < last; ++i) {
      if (args[i] == value) return {d.get(), i - first};
    }
  }
  return {};
}

std::string name_at(const Position& p, bool output) {
  if (p.delegate == nullptr || !p.delegate->library || p.delegate->container == nullptr) return "";
  const ContainerApi& api = p.delegate->library->api();
  auto fn = output ? api.get_output_name : api.get_input_name;
  const char* name = nullptr;
  if (fn == nullptr || fn(p.delegate->container, p.index, &name) != 0 || name == nullptr) return "";
  return name;
}

}  // namespace

void describe_io(const Method& m, MethodMeta& meta) {
  // The input checks are read from the library's bytes: scan each delegate once.
  std::map<const Delegate*, std::map<int, std::vector<int>>> checks;
  for (const ValueSpec& v : m.spec->outputs) meta.output_names.push_back(name_at(find_position(m, v.value_index, true), true));
  for (std::size_t k = 0; k < m.spec->inputs.size(); ++k) {
    const ValueSpec& v = m.spec->inputs[k];
    const Position p = find_position(m, v.value_index, false);
    meta.input_names.push_back(name_at(p, false));
    std::vector<DynamicDim> dims;
    if (v.kind == ValueKind::kTensor && v.tensor.dynamic) {
      std::vector<int> varying;
      if (p.delegate != nullptr) {
        auto found = checks.find(p.delegate);
        if (found == checks.end()) {
          found = checks.emplace(p.delegate, format::aoti_dynamic_input_dims(p.delegate->spec->so)).first;
        }
        const auto& all = found->second;
        const auto it = all.find(static_cast<int>(p.index));
        if (it != all.end()) varying = it->second;
        if (varying.empty() && !all.empty()) varying = {-1};  // the check exists and names no range: static
      }
      for (std::size_t d = 0; d < v.tensor.sizes.size(); ++d) {
        const bool listed = std::find(varying.begin(), varying.end(), static_cast<int>(d)) != varying.end();
        if (listed || varying.empty()) dims.push_back({d, v.tensor.sizes[d]});
      }
    }
    meta.dynamic_dims.push_back(std::move(dims));
  }
}

}  // namespace aoti_cuda::runtime
