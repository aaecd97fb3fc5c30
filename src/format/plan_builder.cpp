// The instruction walk of a method: PlanSteps for CUDA delegate calls, moves
// and et_copy host<->device copies; everything else becomes a not-runnable
// reason (S2 index checks on the way). See reader.hpp.
#include "common/text.hpp"
#include "format/reader.hpp"

namespace aoti_cuda {

using format::invalid;
using format::u64s;

void Program::Impl::build_plan(format::MethodBuild& b) {
  const std::string& F = b.pte->label;
  const std::string& where = b.where;
  MethodSpec& m = b.m;
  std::vector<std::string>& reasons = b.reasons;
  const auto* chains = b.plan->chains();
  auto check_index = [&](std::int64_t idx, const std::string& field) { b.check_index(idx, field); };
  for (flatbuffers::uoffset_t ci = 0; ci < chains->size(); ++ci) {
    const et::Chain* chain = chains->Get(ci);
    const std::string cw = "chains[" + std::to_string(ci) + "]";
    if (chain->inputs()) for (auto idx : *chain->inputs()) check_index(idx, cw + ".inputs");
    if (chain->outputs()) for (auto idx : *chain->outputs()) check_index(idx, cw + ".outputs");
    const auto* instrs = chain->instructions();
    if (instrs == nullptr) invalid(F, "S2 (plan fields)", where + ": " + cw + ".instructions is missing");
    for (flatbuffers::uoffset_t ii = 0; ii < instrs->size(); ++ii) {
      const et::Instruction* ins = instrs->Get(ii);
      const std::string iw = cw + ".instructions[" + std::to_string(ii) + "]";
      const int tag = static_cast<int>(ins->instr_args_type());
      if (tag < 1 || tag > 5 || ins->instr_args() == nullptr) {
        invalid(F, "S2 (instruction)", where + ": " + iw + " has union tag " + std::to_string(tag) +
                                           (tag == 0 ? " (NONE)" : tag > 5 ? " (unknown)" : " with no value") +
                                           " at offset " + u64s(pte.fb_offset_of(ins)));
      }
      if (const et::DelegateCall* dc = ins->instr_args_as_DelegateCall()) {
        plan_delegate_call(b, iw, dc);
      } else if (const et::KernelCall* kc = ins->instr_args_as_KernelCall()) {
        plan_kernel_call(b, iw, kc);
      } else if (const et::MoveCall* mc = ins->instr_args_as_MoveCall()) {
        check_index(mc->move_from(), iw + " MoveCall.move_from");
        check_index(mc->move_to(), iw + " MoveCall.move_to");
        PlanStep step;
        step.kind = PlanStep::Kind::kMove;
        step.args = {mc->move_from(), mc->move_to()};
        m.plan.push_back(std::move(step));
      } else if (const et::JumpFalseCall* jf = ins->instr_args_as_JumpFalseCall()) {
        check_index(jf->cond_value_index(), iw + " JumpFalseCall.cond_value_index");
        if (jf->destination_instruction() < 0 || static_cast<std::uint32_t>(jf->destination_instruction()) >= instrs->size()) {
          invalid(F, "S2 (instruction)", where + ": " + iw + " destination_instruction " +
                                             std::to_string(jf->destination_instruction()) + " is out of range");
        }
        reasons.push_back("control flow (JumpFalseCall at " + iw + ") is not supported; only straight-line plans run");
      } else if (const et::FreeCall* fc = ins->instr_args_as_FreeCall()) {
        check_index(fc->value_index(), iw + " FreeCall.value_index");
        reasons.push_back("FreeCall at " + iw + " (dynamic memory release) is not supported");
      }
    }
  }
}

void Program::Impl::plan_delegate_call(format::MethodBuild& b, const std::string& iw, const et::DelegateCall* dc) {
  const std::string& F = b.pte->label;
  const std::string& where = b.where;
  MethodSpec& m = b.m;
  const auto* delegates = b.plan->delegates();
  if (dc->args() == nullptr) invalid(F, "S2 (instruction)", where + ": " + iw + " DelegateCall.args is missing");
  for (auto a : *dc->args()) b.check_index(a, iw + " DelegateCall.args");
  const int32_t di = dc->delegate_index();
  if (di < 0 || static_cast<std::uint32_t>(di) >= delegates->size()) {
    invalid(F, "S2 (instruction)", where + ": " + iw + " delegate_index " + std::to_string(di) + " is out of range (" +
                                       std::to_string(delegates->size()) + " delegates)");
  }
  const et::BackendDelegate* d = delegates->Get(static_cast<flatbuffers::uoffset_t>(di));
  const std::string id = d->id()->str();
  if (id != format::kCudaBackend) {
    b.other_backends.insert(id);
    return;
  }
  PlanStep step;
  step.kind = PlanStep::Kind::kDelegate;
  for (auto a : *dc->args()) step.args.push_back(a);
  auto it = b.delegate_slot.find(di);
  if (it == b.delegate_slot.end()) {
    DelegateSpec ds;
    ds.delegate_index = di;
    ds.backend_id = id;
    ds.args = step.args;
    resolve_delegate(m, ds, b.prog, d);
    it = b.delegate_slot.emplace(di, static_cast<int>(m.delegates.size())).first;
    m.delegates.push_back(std::move(ds));
  }
  step.delegate = it->second;
  m.plan.push_back(std::move(step));
}

void Program::Impl::plan_kernel_call(format::MethodBuild& b, const std::string& iw, const et::KernelCall* kc) {
  const std::string& F = b.pte->label;
  const std::string& where = b.where;
  const auto* ops = b.plan->operators();
  if (kc->args() == nullptr) invalid(F, "S2 (instruction)", where + ": " + iw + " KernelCall.args is missing");
  for (auto a : *kc->args()) b.check_index(a, iw + " KernelCall.args");
  const int32_t oi = kc->op_index();
  if (ops == nullptr || oi < 0 || static_cast<std::uint32_t>(oi) >= ops->size()) {
    invalid(F, "S2 (instruction)", where + ": " + iw + " op_index " + std::to_string(oi) + " is out of range (" +
                                       std::to_string(ops ? ops->size() : 0) + " operators)");
  }
  const et::Operator* op = ops->Get(static_cast<flatbuffers::uoffset_t>(oi));
  if (op->name() == nullptr) invalid(F, "S2 (instruction)", where + ": operators[" + std::to_string(oi) + "].name is missing");
  std::string full = op->name()->str();
  if (op->overload() != nullptr && op->overload()->size() > 0) full += "." + op->overload()->str();
  PlanStep step;
  if (full == "et_copy::_h2d_copy.out") {
    step.kind = PlanStep::Kind::kHostToDevice;
  } else if (full == "et_copy::_d2h_copy.out") {
    step.kind = PlanStep::Kind::kDeviceToHost;
  } else {
    b.other_ops.insert(full);
    return;
  }
  // Out-variant kernel args are {self, out} and the emitter may append the
  // returned value (== out) once more.
  const auto* args = kc->args();
  if (args->size() < 2 || args->size() > 3 || (args->size() == 3 && args->Get(2) != args->Get(1))) {
    b.reasons.push_back(full + " at " + iw + " has " + std::to_string(args->size()) + " args (expected {src, out})");
    return;
  }
  step.args = {args->Get(0), args->Get(1)};
  b.m.plan.push_back(std::move(step));
}

// The not-runnable reasons of the whole method, joined.
void Program::Impl::finish_method(format::MethodBuild& b) {
  MethodSpec& m = b.m;
  std::vector<std::string>& reasons = b.reasons;
  const auto* chains = b.plan->chains();
  if (chains->size() > 1) reasons.push_back("the plan has " + std::to_string(chains->size()) + " chains; only 1 is supported");
  std::size_t n_instr = 0;
  for (flatbuffers::uoffset_t ci = 0; ci < chains->size(); ++ci) n_instr += chains->Get(ci)->instructions()->size();
  if (n_instr == 0) reasons.push_back("constant method: it has no instructions (its outputs are constants stored in the program)");
  if (!b.other_backends.empty()) {
    std::string s = "delegates to backends other than CudaBackend:";
    for (const auto& name : b.other_backends) s += " " + name;
    reasons.push_back(s);
  }
  if (!b.other_ops.empty()) {
    std::string s = "non-delegated kernel operators (only et_copy::_h2d_copy.out / _d2h_copy.out run here):";
    for (const auto& o : b.other_ops) s += " " + o;
    reasons.push_back(s);
  }
  if (!m.not_runnable_reason.empty()) reasons.insert(reasons.begin(), m.not_runnable_reason);
  const std::string joined = common::join(reasons, "; ");
  m.not_runnable_reason = joined;
  m.runnable = joined.empty();
}

}  // namespace aoti_cuda
