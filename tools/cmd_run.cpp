// `aoti_cuda run`: load a program, run one method, print (and optionally save
// or check) its outputs.
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

#include "aoti_cuda/aoti_cuda.hpp"
#include "cli.hpp"
#include "tensor_io.hpp"

namespace {

const char* kRunHelp =
    "usage: aoti_cuda run MODEL.pte [options]\n"
    "\n"
    "Loads MODEL.pte (and aoti_cuda_blob.ptd beside it, or the --data files), runs one\n"
    "method and prints each output's dtype, shape and summary statistics. Exit status\n"
    "1 on an error or an --expect mismatch, 2 for an unknown option.\n"
    "\n"
    "options:\n"
    "  --data FILE.ptd      data file (repeatable; default: aoti_cuda_blob.ptd beside the .pte)\n"
    "  --method NAME        method to run (default: forward, or the only method)\n"
    "  --input FILE[@SHAPE] input tensor, in order (repeatable): .npy (own dtype/shape) or raw\n"
    "                       little-endian .bin (dtype/shape from the method; for a dynamic\n"
    "                       tensor one shrunk dimension is inferred from the file size, or\n"
    "                       give the shape: x.bin@1,17,64)\n"
    "  --random             fill inputs without --input with reproducible random values\n"
    "  --output DIR         write outputs as DIR/<method>.out<i>.npy\n"
    "  --expect FILE        expected output, in order (repeatable; raw .bin); exit 1 on mismatch\n"
    "  --atol X, --rtol X   tolerances for --expect (default 1e-3 each)\n"
    "  --device N           CUDA device ordinal (default 0)\n"
    "  --device-io          pass inputs in device memory (outputs are still copied to the host)\n"
    "  -h, --help           this help\n";

void print_summary(size_t i, const aoti_cuda::Tensor& t) {
  double mn = 0, mx = 0, sum = 0;
  const int64_t n = t.numel();
  for (int64_t k = 0; k < n; ++k) {
    const double v = aoti_cuda_cli::element_as_double(t, k);
    if (k == 0 || v < mn) mn = v;
    if (k == 0 || v > mx) mx = v;
    sum += v;
  }
  std::printf("  output %zu: %-20s min %-12.6g max %-12.6g mean %-12.6g first [", i,
              aoti_cuda_cli::describe(t).c_str(), mn, mx, n ? sum / n : 0.0);
  for (int64_t k = 0; k < n && k < 4; ++k) std::printf(k ? ", %.6g" : "%.6g", aoti_cuda_cli::element_as_double(t, k));
  std::printf(n > 4 ? ", ...]\n" : "]\n");
}

}  // namespace

int cmd_run(int argc, char** argv) {
  std::string model, method, output_dir;
  std::vector<std::string> inputs, expects;
  aoti_cuda::LoadOptions load;
  bool random = false, device_io = false;
  double atol = 1e-3, rtol = 1e-3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kRunHelp, stdout);
      return 0;
    } else if (a == "--data") {
      load.data_files.push_back(aoti_cuda_cli::option_value("run", i, argc, argv));
    } else if (a == "--method") {
      method = aoti_cuda_cli::option_value("run", i, argc, argv);
    } else if (a == "--input") {
      inputs.push_back(aoti_cuda_cli::option_value("run", i, argc, argv));
    } else if (a == "--expect") {
      expects.push_back(aoti_cuda_cli::option_value("run", i, argc, argv));
    } else if (a == "--output") {
      output_dir = aoti_cuda_cli::option_value("run", i, argc, argv);
    } else if (a == "--atol") {
      atol = aoti_cuda_cli::double_option("run", i, argc, argv);
    } else if (a == "--rtol") {
      rtol = aoti_cuda_cli::double_option("run", i, argc, argv);
    } else if (a == "--device") {
      load.device = aoti_cuda::Device::cuda(static_cast<int>(aoti_cuda_cli::int_option("run", i, argc, argv)));
    } else if (a == "--random") {
      random = true;
    } else if (a == "--device-io") {
      device_io = true;
    } else if (const int rc = aoti_cuda_cli::take_program_arg("run", a, model, kRunHelp)) {
      return rc;
    }
  }
  if (model.empty()) {
    std::fputs(kRunHelp, stderr);
    return 2;
  }
  if (isatty(STDERR_FILENO)) load.on_progress = aoti_cuda_cli::terminal_progress;

  aoti_cuda::Module module(model, load);
  if (method.empty()) method = aoti_cuda_cli::default_method(module);
  const aoti_cuda::MethodMeta meta = module.method_meta(method);
  if (inputs.size() > meta.inputs.size()) {
    throw aoti_cuda::Error(aoti_cuda::ErrorCode::kInvalidArgument,
                           "method '" + method + "' takes " + std::to_string(meta.inputs.size()) + " inputs, " +
                               std::to_string(inputs.size()) + " --input files given");
  }
  if (inputs.size() < meta.inputs.size() && !random) {
    throw aoti_cuda::Error(aoti_cuda::ErrorCode::kInvalidArgument,
                           "method '" + method + "' takes " + std::to_string(meta.inputs.size()) +
                               " inputs; pass --input for each or --random");
  }
  std::vector<aoti_cuda::Tensor> args;
  for (size_t i = 0; i < meta.inputs.size(); ++i) {
    aoti_cuda::Tensor t = i < inputs.size() ? aoti_cuda_cli::load_tensor(inputs[i], meta.inputs[i])
                                            : aoti_cuda_cli::random_tensor(meta.inputs[i], 1234u + static_cast<uint32_t>(i));
    args.push_back(device_io ? t.to(load.device) : t);
  }
  aoti_cuda::RunOptions run;
  run.outputs = aoti_cuda::OutputLocation::kHost;
  std::vector<aoti_cuda::Tensor> outs = module.execute(method, args, run);

  const aoti_cuda::LoadTimings lt = module.load_timings();
  std::printf("%s: method '%s' ran; load %.1f ms (parse %.1f, device init %.1f, library %.1f, container %.1f, weights %.1f)\n",
              model.c_str(), method.c_str(), lt.total_ms, lt.parse_ms, lt.device_init_ms, lt.library_ms, lt.container_ms, lt.weights_ms);
  const aoti_cuda::LoadStats ls = module.load_stats();
  std::printf("  weights: %zu bytes uploaded in %.1f ms (%.2f GB/s, %zu page-locked)%s%s\n", ls.weight_bytes, ls.upload_ms,
              ls.upload_gb_per_s, ls.page_locked_bytes, ls.upload_note.empty() ? "" : "; ", ls.upload_note.c_str());
  if (ls.deduplicated_constants + ls.shared_state_constants > 0) {
    std::printf("  %zu identical constant(s) deduplicated (%zu blob bytes not uploaded), %zu buffer(s) shared\n",
                ls.deduplicated_constants, ls.deduplicated_bytes, ls.shared_state_constants);
  }
  for (size_t i = 0; i < outs.size(); ++i) print_summary(i, outs[i]);

  if (!output_dir.empty()) {
    for (size_t i = 0; i < outs.size(); ++i) {
      const std::string path = output_dir + "/" + method + ".out" + std::to_string(i) + ".npy";
      aoti_cuda_cli::save_tensor(outs[i], path);
      std::printf("  wrote %s\n", path.c_str());
    }
  }
  int rc = 0;
  if (expects.size() > outs.size()) {
    std::fprintf(stderr, "%zu --expect files for %zu outputs\n", expects.size(), outs.size());
    return 1;
  }
  for (size_t i = 0; i < expects.size(); ++i) {
    const auto c = aoti_cuda_cli::compare_to_file(outs[i], expects[i], atol, rtol);
    std::printf("  output %zu vs %s: %s\n", i, expects[i].c_str(), c.message.c_str());
    if (!c.ok) rc = 1;
  }
  return rc;
}
