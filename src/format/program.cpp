// Program: opens, verifies and describes ExecuTorch .pte/.ptd files.
//
// Order of work (the files of the reader are listed in reader.hpp):
// container header checks (P1-P7, D1-D2) in overflow-checked u64 arithmetic,
// an aligned view of the flatbuffer bytes, the FlatBuffers Verifier (P8, D3),
// root checks (P9, D4), then semantic checks (S1-S9, D5, M1, M2) on every
// field this reader touches, and finally the method descriptions and CUDA
// delegate blob resolution. Every check: docs/format-checks.md.
#include <sys/stat.h>

#include "format/reader.hpp"

namespace aoti_cuda {

using format::invalid;
using format::quoted;
using format::u64s;

void Program::Impl::load() {
  format::parse_pte_header(pte);
  {
    flatbuffers::Verifier v(pte.fb, pte.fb_size, format::verifier_options());
    if (!et::VerifyProgramBuffer(v)) {
      invalid(pte.label, "P8 (flatbuffer verification)",
              "the Program flatbuffer [0, " + u64s(pte.fb_size) +
                  ") is malformed (an offset, length, alignment or table is out of bounds)");
    }
  }
  const et::Program* prog = et::GetProgram(pte.fb);

  load_pte_data(prog);
  for (auto& p : ptds) load_ptd(*p);
  build_methods(prog);
  check_fqn_store();
}

void Program::Impl::build_methods(const et::Program* prog) {
  const auto* plans = prog->execution_plan();
  if (plans == nullptr) invalid(pte.label, "S1 (execution plan)", "Program.execution_plan is missing");
  std::set<std::string> names;
  for (flatbuffers::uoffset_t pi = 0; pi < plans->size(); ++pi) methods.push_back(build_method(prog, pi, names));
}

Program::Program() : impl_(new Impl) {}
Program::Program(Program&&) noexcept = default;
Program& Program::operator=(Program&&) noexcept = default;
Program::~Program() = default;

Program Program::open(const std::string& pte_path, const ProgramOptions& options) {
  Program p;
  Impl& im = *p.impl_;
  im.require_data = options.require_data;
  im.pte_path = pte_path;
  im.pte.label = pte_path;
  im.pte.mapping = std::make_unique<format::MappedFile>(pte_path);
  im.pte.bytes = ByteView{im.pte.mapping->data(), im.pte.mapping->size()};
  std::vector<std::string> data = options.data_files;
  if (data.empty()) {
    const std::size_t slash = pte_path.find_last_of('/');
    const std::string dir = slash == std::string::npos ? std::string() : pte_path.substr(0, slash + 1);
    const std::string candidate = dir + format::kDefaultPtdName;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0) data.push_back(candidate);
  }
  for (const auto& path : data) {
    auto fd = std::make_unique<format::FileData>();
    fd->label = path;
    try {
      fd->mapping = std::make_unique<format::MappedFile>(path);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kNotFound) {
        throw Error(ErrorCode::kNotFound, path + ": data file not found (given as a .ptd for " + pte_path + ")");
      }
      throw;
    }
    fd->bytes = ByteView{fd->mapping->data(), fd->mapping->size()};
    im.ptds.push_back(std::move(fd));
    im.data_paths.push_back(path);
  }
  im.load();
  return p;
}

Program Program::from_memory(ByteView pte, const std::vector<ByteView>& data_files, const std::string& label,
                             bool require_data) {
  Program p;
  Impl& im = *p.impl_;
  im.require_data = require_data;
  im.pte_path = label;
  im.pte.label = label;
  if (pte.data == nullptr && pte.size != 0) throw Error(ErrorCode::kInvalidArgument, label + ": null .pte pointer");
  static const std::uint8_t kEmpty[1] = {0};
  im.pte.bytes = pte.data ? pte : ByteView{kEmpty, 0};
  for (std::size_t i = 0; i < data_files.size(); ++i) {
    if (data_files[i].data == nullptr && data_files[i].size != 0) {
      throw Error(ErrorCode::kInvalidArgument, label + ": null pointer for data file " + std::to_string(i));
    }
    auto fd = std::make_unique<format::FileData>();
    fd->label = label + ".ptd[" + std::to_string(i) + "]";
    fd->bytes = data_files[i].data ? data_files[i] : ByteView{kEmpty, 0};
    im.data_paths.push_back(fd->label);
    im.ptds.push_back(std::move(fd));
  }
  im.load();
  return p;
}

const std::vector<MethodSpec>& Program::methods() const noexcept { return impl_->methods; }

std::vector<std::string> Program::method_names() const {
  std::vector<std::string> out;
  for (const auto& m : impl_->methods) out.push_back(m.name);
  return out;
}

const MethodSpec& Program::method(std::string_view name) const {
  for (const auto& m : impl_->methods) {
    if (m.name == name) return m;
  }
  std::string valid;
  for (const auto& m : impl_->methods) valid += (valid.empty() ? "" : ", ") + quoted(m.name);
  throw Error(ErrorCode::kNotFound, impl_->pte_path + ": no method " + quoted(name) + " (methods: " +
                                        (valid.empty() ? std::string("none") : valid) + ")");
}

std::optional<ByteView> Program::named_data(std::string_view key) const {
  auto e = impl_->lookup(key);
  if (!e) return std::nullopt;
  return e->bytes;
}

std::vector<NamedDataInfo> Program::named_data_entries() const { return impl_->named_order; }

const std::string& Program::pte_path() const noexcept { return impl_->pte_path; }
const std::vector<std::string>& Program::data_paths() const noexcept { return impl_->data_paths; }

}  // namespace aoti_cuda
