// Text form of `aoti_cuda inspect` (rendered from its JSON document).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "aoti_cuda/program.hpp"

namespace aoti_cuda_cli {

/// "float32[<=64,8] (dynamic)", "int", "None", ...
std::string value_type(const aoti_cuda::ValueSpec& v);

/// Prints the document cmd_inspect.cpp builds.
void print_inspect_text(const nlohmann::json& doc);

}  // namespace aoti_cuda_cli
