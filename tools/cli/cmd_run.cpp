// `aoti_cuda run`: check the arguments and files, load only the method asked
// for, run it once, print (and optionally save or check) its outputs.
#include <cstdio>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "tensor_io.hpp"

namespace aoti_cuda_cli {
namespace {

struct RunArgs {
  std::string model, method, output_dir;
  std::vector<std::string> data, inputs, expects;
  bool random = false, device_io = false, json = false;
  double atol = 1e-3, rtol = 1e-3;
  int device = 0;
  aoti_cuda::TuningOptions tuning;
};

nlohmann::json summary(const aoti_cuda::Tensor& t) {
  double mn = 0, mx = 0, sum = 0;
  const int64_t n = t.numel();
  std::vector<double> first;
  for (int64_t k = 0; k < n; ++k) {
    const double v = element_as_double(t, k);
    if (k == 0 || v < mn) mn = v;
    if (k == 0 || v > mx) mx = v;
    sum += v;
    if (k < 4) first.push_back(v);
  }
  return {{"type", describe(t)}, {"min", mn}, {"max", mx}, {"mean", n ? sum / n : 0.0}, {"first", first}};
}

void print_output(std::size_t i, const nlohmann::json& s) {
  std::printf("  output %zu: %-20s min %-12.6g max %-12.6g mean %-12.6g first [", i,
              s["type"].get<std::string>().c_str(), s["min"].get<double>(), s["max"].get<double>(),
              s["mean"].get<double>());
  const auto& f = s["first"];
  for (std::size_t k = 0; k < f.size(); ++k) std::printf(k ? ", %.6g" : "%.6g", f[k].get<double>());
  std::printf("]\n");
}

// Everything that needs no GPU: the program, the method, the input files.
std::vector<aoti_cuda::Tensor> read_inputs(const RunArgs& a, const aoti_cuda::MethodSpec& m) {
  if (a.inputs.size() > m.inputs.size() || (a.inputs.size() < m.inputs.size() && !a.random)) {
    throw UsageError("method '" + m.name + "' takes " + std::to_string(m.inputs.size()) + " input(s); " +
                     std::to_string(a.inputs.size()) + " --input given" +
                     (a.inputs.size() < m.inputs.size() ? " (pass --input for each, or --random)" : ""));
  }
  std::vector<aoti_cuda::Tensor> args;
  for (std::size_t i = 0; i < m.inputs.size(); ++i) {
    if (m.inputs[i].kind != aoti_cuda::ValueKind::kTensor) {
      throw aoti_cuda::Error(aoti_cuda::ErrorCode::kUnsupported,
                             "input " + std::to_string(i) + " of '" + m.name + "' is not a tensor");
    }
    const aoti_cuda::TensorSpec& spec = m.inputs[i].tensor;
    args.push_back(i < a.inputs.size() ? load_tensor(a.inputs[i], spec)
                                       : random_tensor(spec, 1234u + static_cast<uint32_t>(i)));
  }
  return args;
}

int run_method(const RunArgs& a) {
  (void)aoti_cuda::resolve_tuning(a.tuning);  // bad tuning flags or variables: exit 2 before reading anything
  aoti_cuda::ProgramOptions popts;
  popts.data_files = a.data;
  aoti_cuda::Program program = aoti_cuda::Program::open(a.model, popts);
  const std::string method = choose_method(program, a.method);
  check_method_runnable(program, method);
  std::vector<aoti_cuda::Tensor> args = read_inputs(a, program.method(method));
  if (a.expects.size() > program.method(method).outputs.size()) {
    throw UsageError(std::to_string(a.expects.size()) + " --expect files for " +
                     std::to_string(program.method(method).outputs.size()) + " output(s) of '" + method + "'");
  }

  aoti_cuda::LoadOptions load;
  load.device = aoti_cuda::Device::cuda(a.device);
  load.methods = {method};
  load.tuning = a.tuning;
  if (!a.json && isatty(STDERR_FILENO)) load.on_progress = terminal_progress;
  aoti_cuda::Module module(std::move(program), load);
  if (a.device_io) {
    for (aoti_cuda::Tensor& t : args) t = t.to(load.device);
  }
  aoti_cuda::RunOptions run;
  run.outputs = aoti_cuda::OutputLocation::kHost;
  const std::vector<aoti_cuda::Tensor> outs = module.execute(method, args, run);

  const aoti_cuda::LoadTimings lt = module.load_timings();
  nlohmann::json doc = {{"program", a.model},
                        {"method", method},
                        {"load_ms", lt.total_ms},
                        {"tuning", tuning_json(module.tuning())},
                        {"outputs", nlohmann::json::array()}};
  if (!a.json) {
    std::printf("%s: method '%s' ran; load %.1f ms (parse %.1f, device init %.1f, library %.1f, container %.1f, weights %.1f)\n",
                a.model.c_str(), method.c_str(), lt.total_ms, lt.parse_ms, lt.device_init_ms, lt.library_ms,
                lt.container_ms, lt.weights_ms);
  }
  const aoti_cuda::LoadStats ls = module.load_stats();
  doc["weights"] = {{"uploaded_bytes", ls.weight_bytes},        {"upload_ms", ls.upload_ms},
                    {"upload_gb_per_s", ls.upload_gb_per_s},    {"page_locked_bytes", ls.page_locked_bytes},
                    {"staged_bytes", ls.staged_bytes},
                    {"deduplicated_bytes", ls.deduplicated_bytes}, {"deduplicated_constants", ls.deduplicated_constants},
                    {"shared_state_constants", ls.shared_state_constants}, {"upload_note", ls.upload_note}};
  if (!a.json) {
    std::printf("  weights: %zu bytes uploaded in %.1f ms (%.2f GB/s, %zu through pinned staging, %zu page-locked); %zu "
                "identical constant(s) deduplicated (%zu blob bytes not uploaded)%s%s\n",
                ls.weight_bytes, ls.upload_ms, ls.upload_gb_per_s, ls.staged_bytes, ls.page_locked_bytes,
                ls.deduplicated_constants,
                ls.deduplicated_bytes, ls.upload_note.empty() ? "" : "; ", ls.upload_note.c_str());
  }
  for (std::size_t i = 0; i < outs.size(); ++i) {
    doc["outputs"].push_back(summary(outs[i]));
    if (!a.json) print_output(i, doc["outputs"].back());
  }
  for (std::size_t i = 0; !a.output_dir.empty() && i < outs.size(); ++i) {
    const std::string path = a.output_dir + "/" + method + ".out" + std::to_string(i) + ".npy";
    save_tensor(outs[i], path);
    doc["outputs"][i]["written"] = path;
    if (!a.json) std::printf("  wrote %s\n", path.c_str());
  }
  int rc = kExitOk;
  for (std::size_t i = 0; i < a.expects.size(); ++i) {
    const Comparison c = compare_to_file(outs[i], a.expects[i], a.atol, a.rtol);
    doc["outputs"][i]["expect"] = {{"file", a.expects[i]}, {"match", c.ok}, {"max_abs_err", c.max_abs_err}};
    if (!a.json) std::printf("  output %zu vs %s: %s\n", i, a.expects[i].c_str(), c.message.c_str());
    if (!c.ok) rc = kExitMismatch;
  }
  if (a.json) std::printf("%s\n", doc.dump(2).c_str());
  return rc;
}

}  // namespace

Runner add_run(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("run", "run one method and print, save or check its outputs");
  cmd->footer(
      "Arguments and files are checked before anything is loaded; only the chosen method is loaded.\n"
      "--input takes .npy (own dtype and shape) or raw little-endian .bin (dtype and shape from the\n"
      "method; for a dynamic tensor one shrunk dimension is inferred from the file size, or give the\n"
      "shape: x.bin@1,17,64). --expect takes .npy or raw .bin.\n"
      "Exit status: 0 ok, 1 failure, 2 usage error, 3 not runnable here, 4 outputs differ from --expect.");
  auto a = std::make_shared<RunArgs>();
  add_model_option(*cmd, a->model);
  add_data_option(*cmd, a->data);
  cmd->add_option("--method", a->method, "method to run (default: forward, or the first method)");
  cmd->add_option("--input", a->inputs, "input tensor file, in order (repeatable): .npy or .bin[@SHAPE]")
      ->check(existing_file_with_shape())
      ->allow_extra_args(false);
  cmd->add_flag("--random", a->random, "fill inputs without --input with reproducible random values");
  cmd->add_option("--output", a->output_dir, "write outputs as DIR/<method>.out<i>.npy")->check(CLI::ExistingDirectory);
  cmd->add_option("--expect", a->expects, "expected output, in order (repeatable): .npy or raw .bin")
      ->check(CLI::ExistingFile)
      ->allow_extra_args(false);
  cmd->add_option("--atol", a->atol, "absolute tolerance for --expect (default 1e-3)")->check(finite_non_negative());
  cmd->add_option("--rtol", a->rtol, "relative tolerance for --expect (default 1e-3)")->check(finite_non_negative());
  add_device_option(*cmd, a->device);
  cmd->add_flag("--device-io", a->device_io, "pass inputs in device memory (outputs are still copied to the host)");
  add_json_flag(*cmd, a->json);
  add_tuning_options(*cmd, a->tuning);
  return [a] { return run_method(*a); };
}

}  // namespace aoti_cuda_cli
