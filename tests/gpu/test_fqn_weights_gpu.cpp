// GPU: the per-FQN weight path of ExecuTorch 1.5 programs (runtime/fqn_weights.hpp)
// on real AOTInductor libraries. Each bundled fixture (ExecuTorch 1.2, one
// weights blob per method) is re-packed in the 1.5 layout: the same .so, each
// constant's bytes stored under `cuda_fqn_weight:cuda:<fqn>` with the view its
// library gives it, ETCUDAFQN3 metadata as the delegate payload, one store for
// every method. Loaded that way, the constants are bound as user-managed device
// buffers (read-only ones once per Module) instead of being copied from a blob;
// every method must still give the fixture's reference outputs.
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aoti_cuda/aoti_cuda.hpp"
#include "aoti_cuda/shim.h"
#include "runtime/constant_sharing.hpp"
#include "runtime/method.hpp"
#include "shim/handle_capture.hpp"
#include "support/gpu.hpp"
#include "support/pte_builder.hpp"
#include "support/test_util.hpp"

using aoti_cuda::DType;
using aoti_cuda::Module;
using aoti_cuda::Program;
using aoti_cuda::Tensor;
using namespace aoti_cuda_test;

namespace {

// The constants of one delegate as its library installs them from its blob:
// table entries with their blob ranges, and the handles (sizes, strides, offset).
std::vector<FqnWeightDesc> constants_of(const aoti_cuda::DelegateSpec& ds) {
  using namespace aoti_cuda::runtime;
  Delegate d;
  d.spec = &ds;
  d.cuda_device = 0;
  d.label = "probe";
  d.library = ModelLibrary::load(ds.so, "probe", {});
  const ContainerApi& api = d.library->api();
  REQUIRE(api.create_with_device(&d.container, 1, "cuda:0", nullptr) == 0);
  ConstantSharing::read_table(d);
  REQUIRE(d.constants_known);
  REQUIRE(d.blob_layout_known);
  {
    aoti_cuda::shim::HandleCapture capture(aoti_cuda::shim::CreatedBy::kFromBlob, &d.constant_handles);
    REQUIRE(api.update_constants_from_blob(d.container, ds.weights.data) == 0);
  }
  REQUIRE(d.constant_handles.size() == d.constants.size());
  std::vector<FqnWeightDesc> out;
  for (std::size_t k = 0; k < d.constants.size(); ++k) {
    const ConstantEntry& e = d.constants[k];
    AtenTensorHandle h = d.constant_handles[k];
    int64_t dim = 0, offset = 0;
    int64_t *sizes = nullptr, *strides = nullptr;
    int32_t device_type = 0;
    REQUIRE(aoti_torch_get_device_type(h, &device_type) == 0);
    REQUIRE(aoti_torch_get_dim(h, &dim) == 0);
    REQUIRE(aoti_torch_get_sizes(h, &sizes) == 0);
    REQUIRE(aoti_torch_get_strides(h, &strides) == 0);
    REQUIRE(aoti_torch_get_storage_offset(h, &offset) == 0);
    FqnWeightDesc w;
    w.fqn = e.fqn.empty() ? e.name : e.fqn;
    w.dtype = e.dtype;
    w.device_type = device_type;  // where the library keeps it (CUDA, or CPU for host constants)
    w.storage.assign(ds.weights.data + e.blob_offset, ds.weights.data + e.blob_offset + e.data_size);
    w.storage_offset = offset;
    w.sizes.assign(sizes, sizes + dim);
    w.strides.assign(strides, strides + dim);
    out.push_back(w);
  }
  return out;
}

TensorDesc desc_of(const aoti_cuda::ValueSpec& v) {
  TensorDesc t;
  t.dtype = static_cast<int>(v.tensor.dtype);
  for (int64_t s : v.tensor.sizes) t.sizes.push_back(static_cast<std::int32_t>(s));
  t.dim_order = v.tensor.dim_order;
  t.shape_dynamism = v.tensor.dynamic ? 1 : 0;
  return t;
}

// The fixture in the 1.5 layout, or nothing when a method is not one delegate
// call over its inputs then outputs (what cuda_method writes).
bool repack(const Program& p, BuiltProgram* out) {
  PteBuilder b;
  b.dedupe_ptd_buffers();
  std::map<std::string, std::vector<std::uint8_t>> stored;  // FQN -> its bytes, across methods
  for (const aoti_cuda::MethodSpec& m : p.methods()) {
    if (!m.runnable || m.delegates.size() != 1 || m.plan.size() != 1) return false;
    std::vector<int32_t> io;
    for (const auto& v : m.inputs) io.push_back(v.value_index);
    for (const auto& v : m.outputs) io.push_back(v.value_index);
    const std::vector<int32_t>& args = m.plan[0].args.empty() ? m.delegates[0].args : m.plan[0].args;
    if (args != io || m.delegates[0].weights.empty()) return false;
    std::vector<TensorDesc> ins, outs;
    for (const auto& v : m.inputs) ins.push_back(desc_of(v));
    for (const auto& v : m.outputs) outs.push_back(desc_of(v));
    const aoti_cuda::DelegateSpec& ds = m.delegates[0];
    const Bytes so(ds.so.data, ds.so.data + ds.so.size);
    std::vector<FqnWeightDesc> weights = constants_of(ds);
    // ExecuTorch 1.5 keeps one store per FQN for the whole file, so methods that hold different
    // tensors under one FQN (e.g. encdec's two "fc.bias") cannot come from one exported module.
    for (const FqnWeightDesc& w : weights) {
      const auto [it, fresh] = stored.emplace(w.fqn, w.storage);
      if (!fresh && it->second != w.storage) return false;
    }
    b.add_method(cuda_method(m.name, ins, outs, b.add_fqn_weights(m.name, so, weights)));
  }
  *out = b.build();
  return true;
}

Tensor load_tensor(const std::string& path, const nlohmann::json& t) {
  Tensor x = Tensor::empty(t.at("shape").get<std::vector<int64_t>>(),
                           t.at("dtype") == "float32"    ? DType::kFloat32
                           : t.at("dtype") == "bfloat16" ? DType::kBFloat16
                           : t.at("dtype") == "float16"  ? DType::kFloat16
                           : t.at("dtype") == "int64"    ? DType::kInt64
                           : t.at("dtype") == "int32"    ? DType::kInt32
                                                         : DType::kBool);
  const Bytes raw = read_file(path);
  REQUIRE(raw.size() == x.nbytes());
  std::memcpy(x.data(), raw.data(), raw.size());
  return x;
}

// The elements as float (float32, bfloat16, float16); false for other dtypes.
bool as_floats(const Tensor& t, std::vector<float>* out) {
  const std::size_t n = static_cast<std::size_t>(t.numel());
  out->resize(n);
  const auto* p = static_cast<const std::uint8_t*>(t.data());
  for (std::size_t i = 0; i < n; ++i) {
    if (t.dtype() == DType::kFloat32) {
      std::memcpy(&(*out)[i], p + 4 * i, 4);
    } else if (t.dtype() == DType::kBFloat16) {
      std::uint32_t bits = static_cast<std::uint32_t>(p[2 * i] | (p[2 * i + 1] << 8)) << 16;
      std::memcpy(&(*out)[i], &bits, 4);
    } else if (t.dtype() == DType::kFloat16) {
      __half h;
      std::memcpy(&h, p + 2 * i, 2);
      (*out)[i] = __half2float(h);
    } else {
      return false;
    }
  }
  return true;
}

// True when `got` is within atol + rtol |want| of `want` everywhere (other dtypes: equal bytes).
bool close(const Tensor& got, const Tensor& want, double atol, double rtol) {
  const Tensor g = got.to(aoti_cuda::Device::cpu());
  REQUIRE(g.shape() == want.shape());
  REQUIRE(g.dtype() == want.dtype());
  std::vector<float> a, e;
  if (!as_floats(g, &a) || !as_floats(want, &e)) return std::memcmp(g.data(), want.data(), g.nbytes()) == 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!(std::fabs(double(a[i]) - e[i]) <= atol + rtol * std::fabs(double(e[i])))) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("gpu: fixtures re-packed in ExecuTorch 1.5's per-FQN layout give their reference outputs" *
          AOTI_CUDA_GPU_CASE) {
  int passed = 0, failed = 0, skipped = 0;
  DIR* root = opendir(AOTI_CUDA_TEST_FIXTURES);
  REQUIRE(root != nullptr);
  std::vector<std::string> names;
  while (dirent* e = readdir(root)) {
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  }
  closedir(root);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string dir = std::string(AOTI_CUDA_TEST_FIXTURES) + "/" + name;
    std::ifstream mf(dir + "/manifest.json");
    if (!mf.good()) continue;
    const nlohmann::json manifest = nlohmann::json::parse(mf);
    if (manifest.value("expect_not_runnable", false)) continue;
    CAPTURE(name);
    const Program original = Program::open(dir + "/" + manifest.at("pte").get<std::string>());
    BuiltProgram built;
    if (!repack(original, &built)) {
      ++skipped;
      continue;
    }
    TempDir tmp;
    const std::string pte = built.write(tmp.path, name);
    for (auto it = manifest.at("methods").begin(); it != manifest.at("methods").end(); ++it) {
      CAPTURE(it.key());
      Module m(pte);  // fresh: stateful methods' references start from the initial state
      const aoti_cuda::LoadStats st = m.load_stats();
      std::printf("fqn %s/%s: %zu weight bytes bound, %zu read-only constants shared, staged %zu\n", name.c_str(),
                  it.key().c_str(), st.weight_bytes, st.deduplicated_constants, st.staged_bytes);
      std::vector<Tensor> inputs;
      for (const auto& t : it.value().at("inputs")) inputs.push_back(load_tensor(dir + "/" + t.at("file").get<std::string>(), t));
      const std::vector<Tensor> outs = m.execute(it.key(), inputs);
      bool ok = outs.size() == it.value().at("outputs").size();
      for (std::size_t i = 0; ok && i < outs.size(); ++i) {
        const auto& t = it.value().at("outputs")[i];
        ok = close(outs[i], load_tensor(dir + "/" + t.at("file").get<std::string>(), t), t.value("atol", 0.0),
                   t.value("rtol", 0.0));
      }
      CHECK(ok);
      (ok ? passed : failed)++;
    }
  }
  std::printf("gpu fqn-layout fixtures: %d passed, %d failed, %d fixtures not re-packable\n", passed, failed, skipped);
  CHECK(passed > 0);
  CHECK(failed == 0);
}
