// aoti_cuda::Module: a thin facade. Loading lives in method_loader.cpp,
// constant sharing in constant_sharing.cpp, running in executor.cpp.
#include "aoti_cuda/module.hpp"

#include <algorithm>

#include "common/text.hpp"
#include "runtime/constant_sharing.hpp"
#include "runtime/executor.hpp"
#include "runtime/graph_cache.hpp"
#include "runtime/method.hpp"
#include "runtime/method_loader.hpp"
#include "runtime/state.hpp"

namespace aoti_cuda {
namespace {

using common::Clock;
using common::ms_since;
using runtime::Method;

std::string quoted_names(const std::vector<std::string>& names) {
  std::vector<std::string> q;
  for (const auto& n : names) q.push_back("'" + n + "'");
  return q.empty() ? std::string("(none)") : common::join(q);
}

}  // namespace

struct Module::Impl {
  Program program;
  LoadOptions options;
  runtime::TargetDevice target;
  LoadTimings timings;
  LoadStats stats;
  std::vector<std::unique_ptr<Method>> methods;
  std::unique_ptr<runtime::StateManager> state;  // methods point at it

  explicit Impl(Program p) : program(std::move(p)) {}

  /// `tuning`: opts.tuning resolved (resolve_tuning), before anything was read.
  void load(const LoadOptions& opts, const TuningOptions& tuning, double parse_ms, Clock::time_point t_start);
  void configure_graphs(const LoadOptions& opts);
  Method& find(std::string_view name) const;
};

void Module::Impl::load(const LoadOptions& opts, const TuningOptions& tuning, double parse_ms,
                        Clock::time_point t_start) {
  options = opts;
  options.tuning = tuning;  // every field set: what the loader and Module::tuning() read
  timings.parse_ms = parse_ms;
  auto progress = [this](const char* phase, const std::string& method, std::size_t done, std::size_t total) {
    if (options.on_progress) options.on_progress(LoadProgress{phase, method, done, total});
  };
  progress("parse", "", 1, 1);
  if (opts.num_models == 0) throw Error(ErrorCode::kInvalidArgument, "LoadOptions::num_models must be at least 1");
  if (opts.max_graphs_per_method == 0) {
    throw Error(ErrorCode::kInvalidArgument, "LoadOptions::max_graphs_per_method must be at least 1");
  }
  if (opts.device.is_cuda() && opts.device.index < 0) {
    throw Error(ErrorCode::kInvalidArgument, "LoadOptions::device has a negative CUDA ordinal");
  }
  const std::vector<const MethodSpec*> selected = runtime::select_methods(program, opts.methods);
  target = runtime::open_device(opts.device, program.pte_path(), timings);
  runtime::ConstantSharing sharing(target, opts.deduplicate_constants, opts.share_state);
  runtime::MethodLoader loader(options, target, timings, stats, progress);
  methods = loader.load(selected, sharing);
  state = std::make_unique<runtime::StateManager>(target);
  state->collect(methods);
  configure_graphs(opts);
  timings.total_ms = parse_ms + ms_since(t_start);
}

void Module::Impl::configure_graphs(const LoadOptions& opts) {
  for (const std::string& name : opts.cuda_graph_methods) {
    const bool loaded = std::any_of(methods.begin(), methods.end(), [&](const auto& m) { return m->spec->name == name; });
    if (!loaded) {
      throw Error(ErrorCode::kInvalidArgument, "LoadOptions::cuda_graph_methods names '" + name +
                                                   "', which is not a loaded method");
    }
  }
  for (const auto& m : methods) {
    runtime::MethodGraphs& g = *m->graphs;
    g.requested = opts.cuda_graphs || std::find(opts.cuda_graph_methods.begin(), opts.cuda_graph_methods.end(),
                                                m->spec->name) != opts.cuda_graph_methods.end();
    g.max_per_slot = opts.max_graphs_per_method;
    g.small_copy_kernels = options.tuning.small_copy_kernels.value_or(true);
    if (g.requested && !target.device.is_cuda()) {
      g.disable(m->spec->name, "CUDA graphs need a CUDA device (the Module is loaded on the CPU)");
    }
  }
}

Method& Module::Impl::find(std::string_view name) const {
  for (const auto& m : methods) {
    if (m->spec->name == name) return *m;
  }
  std::vector<std::string> names;
  for (const auto& m : methods) names.push_back(m->spec->name);
  std::string extra;
  for (const MethodSpec& ms : program.methods()) {
    if (ms.name == name) extra = " (the program has it, but it was not loaded" +
                                 std::string(ms.runnable ? "" : ": " + ms.not_runnable_reason) + ")";
  }
  throw Error(ErrorCode::kNotFound, "no method '" + std::string(name) + "' in " + program.pte_path() + extra +
                                        "; loaded methods: " + quoted_names(names));
}

// ---------------------------------------------------------------------------
Module::Module(const std::string& pte_path, const LoadOptions& options) {
  const auto t0 = Clock::now();
  const TuningOptions tuning = resolve_tuning(options.tuning);  // bad settings fail before any file is read
  ProgramOptions po;
  po.data_files = options.data_files;
  Program program = Program::open(pte_path, po);
  const double parse_ms = ms_since(t0);
  auto impl = std::make_unique<Impl>(std::move(program));
  impl->load(options, tuning, parse_ms, Clock::now());
  impl_ = std::move(impl);
}

Module::Module(Program program, const LoadOptions& options) {
  const TuningOptions tuning = resolve_tuning(options.tuning);
  auto impl = std::make_unique<Impl>(std::move(program));
  impl->load(options, tuning, 0.0, Clock::now());
  impl_ = std::move(impl);
}

Module::Module(Module&&) noexcept = default;
Module& Module::operator=(Module&&) noexcept = default;
Module::~Module() = default;

namespace {
// (a template so that the private Module::Impl is never named here)
template <typename Ptr>
auto& checked(const Ptr& impl) {
  if (!impl) throw Error(ErrorCode::kInvalidArgument, "use of a moved-from aoti_cuda::Module");
  return *impl;
}
}  // namespace

std::vector<std::string> Module::method_names() const {
  std::vector<std::string> names;
  for (const auto& m : checked(impl_).methods) names.push_back(m->spec->name);
  return names;
}

std::string Module::default_method() const {
  const auto& methods = checked(impl_).methods;
  for (const auto& m : methods) {
    if (m->spec->name == "forward") return "forward";
  }
  if (methods.empty()) throw Error(ErrorCode::kNotFound, "the Module has no loaded method");
  return methods.front()->spec->name;
}

MethodMeta Module::method_meta(std::string_view method) const {
  const Method& m = checked(impl_).find(method);
  std::call_once(m.meta_once, [&m] {
    MethodMeta meta;
    meta.name = m.spec->name;
    for (const ValueSpec& v : m.spec->inputs) meta.inputs.push_back(v.tensor);
    for (const ValueSpec& v : m.spec->outputs) meta.outputs.push_back(v.tensor);
    meta.num_delegates = m.delegates.size();
    runtime::describe_io(m, meta);
    m.meta = std::move(meta);
  });
  return m.meta;
}

std::vector<Tensor> Module::execute(std::string_view method, const std::vector<Tensor>& inputs,
                                    const RunOptions& options) {
  auto& impl = checked(impl_);
  return runtime::execute_method(impl.find(method), impl.target, inputs, options);
}

void Module::execute_into(std::string_view method, const std::vector<Tensor>& inputs,
                          const std::vector<Tensor>& outputs, const RunOptions& options) {
  auto& impl = checked(impl_);
  (void)runtime::execute_method(impl.find(method), impl.target, inputs, options, &outputs);
}

GraphStatus Module::graph_status(std::string_view method) const {
  const runtime::MethodGraphs& g = *checked(impl_).find(method).graphs;
  GraphStatus st;
  st.requested = g.requested;
  st.available = g.available.load();
  st.reason = g.reason();
  st.graphs = g.graphs.load();
  st.captures = g.captures.load();
  st.replays = g.replays.load();
  st.evictions = g.evictions.load();
  return st;
}

const Program& Module::program() const { return checked(impl_).program; }

LoadTimings Module::load_timings() const { return checked(impl_).timings; }

LoadStats Module::load_stats() const { return checked(impl_).stats; }

TuningOptions Module::tuning() const { return checked(impl_).options.tuning; }

Session Module::create_session() {
  auto& impl = checked(impl_);
  Session s;
  s.impl_ = std::make_unique<Session::Impl>();
  impl.state->create(*s.impl_);
  return s;
}

void Module::reset_state(void* stream) { checked(impl_).state->reset_default(stream); }

std::size_t Module::state_bytes() const { return checked(impl_).state->state_bytes(); }

}  // namespace aoti_cuda
