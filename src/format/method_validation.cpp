// Per-method validation: plan fields and value indices (S1, S2), values and
// tensors (S3-S6), external constants (M2), delegates (S8). See reader.hpp.
#include "format/reader.hpp"

namespace aoti_cuda {

using format::invalid;
using format::quoted;
using format::u64s;

namespace format {

/// S4 checks (also D5 layouts) on sizes/dim_order; returns nbytes.
std::uint64_t check_shape(const std::string& file, const std::string& where, int scalar_type,
                          const flatbuffers::Vector<int32_t>* sizes, const flatbuffers::Vector<uint8_t>* dim_order,
                          const char* check) {
  if (!is_valid_dtype(scalar_type)) {
    invalid(file, check, where + ": scalar_type " + std::to_string(scalar_type) + " is not a known dtype (0..29)");
  }
  if (sizes == nullptr) invalid(file, check, where + ": sizes is missing");
  if (dim_order == nullptr) invalid(file, check, where + ": dim_order is missing");
  const std::size_t rank = sizes->size();
  if (rank > kMaxRank) invalid(file, check, where + ": rank " + std::to_string(rank) + " exceeds the limit of 16");
  if (dim_order->size() != rank) {
    invalid(file, check,
            where + ": dim_order has " + std::to_string(dim_order->size()) + " entries but rank is " + std::to_string(rank));
  }
  bool seen[kMaxRank] = {};
  for (std::size_t i = 0; i < rank; ++i) {
    const unsigned dim = dim_order->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (dim >= rank || seen[dim]) {
      invalid(file, check, where + ": dim_order is not a permutation of 0.." + std::to_string(rank - 1) +
                               " (entry " + std::to_string(i) + " = " + std::to_string(dim) + ")");
    }
    seen[dim] = true;
  }
  std::uint64_t n = element_size(scalar_type);
  for (std::size_t i = 0; i < rank; ++i) {
    const int32_t s = sizes->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (s < 0) invalid(file, check, where + ": size[" + std::to_string(i) + "] = " + std::to_string(s) + " is negative");
    if (!format::mul_u64(n, static_cast<std::uint64_t>(s), &n)) {
      invalid(file, check, where + ": nbytes overflows (sizes product * element size)");
    }
  }
  return n;
}

void MethodBuild::check_index(std::int64_t idx, const std::string& field, bool allow_minus_one) const {
  if (allow_minus_one && idx == -1) return;
  const std::int64_t nvalues = plan->values()->size();
  if (idx < 0 || idx >= nvalues) {
    invalid(pte->label, "S2 (value index)", where + ": " + field + " = " + std::to_string(idx) + " is out of range (" +
                                                std::to_string(nvalues) + " values)");
  }
}

}  // namespace format

namespace {

using format::kMaxRank;

/// S5/S6: a tensor with data_buffer_idx > 0 has initial data in the .pte:
/// constants in the constant segment (or the deprecated constant_buffer),
/// memory-planned tensors in mutable_data_segments[0]. Both must be in bounds.
void check_tensor_data(const et::Program* prog, const std::string& F, const std::string& vw, const et::Tensor* t,
                       std::uint64_t nbytes) {
  const std::uint32_t idx = t->data_buffer_idx();
  const auto* segs = prog->segments();
  auto in_segment = [&](const char* check, std::uint32_t seg_index, std::uint64_t off, const std::string& what) {
    if (segs == nullptr || seg_index >= segs->size()) {
      invalid(F, check, vw + ": " + what + " segment_index " + std::to_string(seg_index) + " is out of range");
    }
    std::uint64_t end = 0;
    const std::uint64_t seg_size = segs->Get(seg_index)->size();
    if (!format::add_u64(off, nbytes, &end) || end > seg_size) {
      invalid(F, check, vw + ": data_buffer_idx " + std::to_string(idx) + " data [" + u64s(off) + ", +" + u64s(nbytes) +
                            ") exceeds its " + what + " segment of " + u64s(seg_size) + " bytes");
    }
  };
  if (t->allocation_info() == nullptr) {
    const et::SubsegmentOffsets* cs = prog->constant_segment();
    const auto* offs = cs ? cs->offsets() : nullptr;
    if (offs != nullptr && offs->size() > 1) {
      if (idx >= offs->size()) {
        invalid(F, "S5 (constants)", vw + ": data_buffer_idx " + std::to_string(idx) + " is out of range (" +
                                         std::to_string(offs->size()) + " constant offsets)");
      }
      in_segment("S5 (constants)", cs->segment_index(), format::scalar_at(offs, idx), "constant");
      return;
    }
    const auto* cb = prog->constant_buffer();
    if (cb != nullptr && idx < cb->size()) {
      const auto* storage = cb->Get(idx)->storage();
      if (storage == nullptr || storage->size() < nbytes) {
        invalid(F, "S5 (constants)", vw + ": constant_buffer[" + std::to_string(idx) + "] holds fewer than " + u64s(nbytes) + " bytes");
      }
      return;
    }
    invalid(F, "S5 (constants)", vw + ": data_buffer_idx " + std::to_string(idx) + " refers to constant data the program does not have");
  }
  const auto* mds = prog->mutable_data_segments();
  if (mds == nullptr || mds->size() == 0 || mds->Get(0)->offsets() == nullptr) {
    invalid(F, "S6 (mutable data)", vw + ": data_buffer_idx " + std::to_string(idx) + " needs mutable_data_segments[0], which is missing");
  }
  const et::SubsegmentOffsets* md = mds->Get(0);
  if (idx >= md->offsets()->size()) {
    invalid(F, "S6 (mutable data)", vw + ": data_buffer_idx " + std::to_string(idx) + " is out of range (" +
                                        std::to_string(md->offsets()->size()) + " mutable offsets)");
  }
  in_segment("S6 (mutable data)", md->segment_index(), format::scalar_at(md->offsets(), idx), "mutable data");
}

ValueKind kind_of(et::KernelTypes t) {
  switch (t) {
    case et::KernelTypes::Null: return ValueKind::kNone;
    case et::KernelTypes::Int: return ValueKind::kInt;
    case et::KernelTypes::Double: return ValueKind::kDouble;
    case et::KernelTypes::Bool: return ValueKind::kBool;
    case et::KernelTypes::String: return ValueKind::kString;
    case et::KernelTypes::Tensor: return ValueKind::kTensor;
    default: return ValueKind::kList;
  }
}

}  // namespace

MethodSpec Program::Impl::build_method(const et::Program* prog, flatbuffers::uoffset_t pi, std::set<std::string>& names) {
  const std::string& F = pte.label;
  const auto* plans = prog->execution_plan();
  const et::ExecutionPlan* plan = plans->Get(pi);
  std::string where = "execution_plan[" + std::to_string(pi) + "]";
  if (plan->name() == nullptr || plan->name()->size() == 0) {
    invalid(F, "S1 (method names)", where + ".name is missing or empty at offset " + u64s(pte.fb_offset_of(plan)));
  }
  MethodSpec m;
  m.name = plan->name()->str();
  if (!names.insert(m.name).second) {
    invalid(F, "S1 (method names)", "method name " + quoted(m.name) + " appears more than once");
  }
  where = "method " + quoted(m.name);
  const auto* values = plan->values();
  const auto* inputs = plan->inputs();
  const auto* outputs = plan->outputs();
  const auto* chains = plan->chains();
  const auto* delegates = plan->delegates();
  const auto* nbs = plan->non_const_buffer_sizes();
  auto require = [&](const void* p, const char* field) {
    if (p == nullptr) invalid(F, "S2 (plan fields)", where + ": " + field + " is missing at offset " + u64s(pte.fb_offset_of(plan)));
  };
  require(values, "values");
  require(inputs, "inputs");
  require(outputs, "outputs");
  require(chains, "chains");
  require(delegates, "delegates");
  require(nbs, "non_const_buffer_sizes");
  if (chains->size() == 0) invalid(F, "S2 (plan fields)", where + ": chains is empty");
  for (flatbuffers::uoffset_t i = 0; i < nbs->size(); ++i) {
    if (format::scalar_at(nbs, i) < 0) {
      invalid(F, "S2 (plan fields)", where + ": non_const_buffer_sizes[" + std::to_string(i) + "] = " +
                                         std::to_string(format::scalar_at(nbs, i)) + " is negative");
    }
  }
  format::MethodBuild b;
  b.prog = prog;
  b.plan = plan;
  b.pte = &pte;
  b.where = where;
  b.m = std::move(m);
  read_values(b);
  read_io(b);
  check_delegates(b);
  build_plan(b);
  finish_method(b);
  return std::move(b.m);
}

void Program::Impl::read_values(format::MethodBuild& b) {
  const std::string& F = b.pte->label;
  const std::string& where = b.where;
  MethodSpec& m = b.m;
  auto check_index = [&](std::int64_t idx, const std::string& field, bool allow_minus_one = false) {
    b.check_index(idx, field, allow_minus_one);
  };
  const et::Program* prog = b.prog;
  const auto* values = b.plan->values();
  std::vector<std::string>& reasons = b.reasons;
  (void)prog;
  (void)reasons;
  for (flatbuffers::uoffset_t vi = 0; vi < values->size(); ++vi) {
    const et::EValue* ev = values->Get(vi);
    const std::string vw = where + " values[" + std::to_string(vi) + "]";
    const auto tag = static_cast<int>(ev->val_type());
    if (tag < 1 || tag > 11) {
      invalid(F, "S3 (value type)", vw + ": union tag " + std::to_string(tag) +
                                        (tag == 0 ? " (NONE)" : " (unknown)") + " at offset " + u64s(pte.fb_offset_of(ev)));
    }
    // A Null value needs no payload table (the runtime accepts it without one).
    if (ev->val() == nullptr && ev->val_type() != et::KernelTypes::Null) {
      invalid(F, "S3 (value type)", vw + ": union tag " + std::to_string(tag) + " has no value at offset " + u64s(pte.fb_offset_of(ev)));
    }
    ValueSpec vs;
    vs.kind = kind_of(ev->val_type());
    vs.value_index = static_cast<int32_t>(vi);
    if (const et::Tensor* t = ev->val_as_Tensor()) {
      read_tensor_value(b, vw, t, vs);
    } else if (const et::TensorList* tl = ev->val_as_TensorList()) {
      if (tl->items() != nullptr) {
        for (auto idx : *tl->items()) check_index(idx, "TensorList item in values[" + std::to_string(vi) + "]");
      }
    } else if (const et::OptionalTensorList* ol = ev->val_as_OptionalTensorList()) {
      if (ol->items() != nullptr) {
        for (auto idx : *ol->items()) check_index(idx, "OptionalTensorList item in values[" + std::to_string(vi) + "]", true);
      }
    }
    m.values.push_back(std::move(vs));
  }
}

void Program::Impl::read_tensor_value(format::MethodBuild& b, const std::string& vw, const et::Tensor* t, ValueSpec& vs) {
  const std::string& F = b.pte->label;
  const auto* nbs = b.plan->non_const_buffer_sizes();
  const std::uint64_t nbytes = format::check_shape(F, vw + " (tensor at offset " + u64s(pte.fb_offset_of(t)) + ")",
                                           static_cast<int>(t->scalar_type()), t->sizes(), t->dim_order(), "S4 (tensor)");
  if (t->storage_offset() != 0) invalid(F, "S4 (tensor)", vw + ": storage_offset " + std::to_string(t->storage_offset()) + " is not 0");
  const int dyn = static_cast<int>(t->shape_dynamism());
  if (dyn != 0 && dyn != 1) {
    invalid(F, "S4 (tensor)", vw + ": shape_dynamism " + std::to_string(dyn) +
                                  (dyn == 2 ? " (DYNAMIC_UNBOUND) is not supported" : " is not a known value"));
  }
  if (const et::ExtraTensorInfo* x = t->extra_tensor_info()) {
    const int loc = static_cast<int>(x->location());
    if (loc != 0 && loc != 1) invalid(F, "S4 (tensor)", vw + ": extra_tensor_info.location " + std::to_string(loc) + " is not a known value");
    if (loc == 1 && (x->fully_qualified_name() == nullptr || x->fully_qualified_name()->size() == 0)) {
      invalid(F, "S4 (tensor)", vw + ": EXTERNAL tensor without a fully_qualified_name");
    }
    const int dev = static_cast<int>(x->device_type());
    if (dev != 0 && dev != 1) invalid(F, "S4 (tensor)", vw + ": extra_tensor_info.device_type " + std::to_string(dev) + " is not a known value");
  }
  if (const et::AllocationDetails* a = t->allocation_info()) {
    const std::uint64_t mid = a->memory_id();
    if (mid < 1 || mid >= nbs->size()) {
      invalid(F, "S4 (tensor)", vw + ": allocation_info.memory_id " + u64s(mid) + " is out of range (1.." +
                                    std::to_string(static_cast<int64_t>(nbs->size()) - 1) + ")");
    }
    const std::uint64_t off = static_cast<std::uint64_t>(a->memory_offset_low()) |
                              (static_cast<std::uint64_t>(a->memory_offset_high()) << 32);
    std::uint64_t end = 0;
    const int64_t buffer_size = format::scalar_at(nbs, static_cast<flatbuffers::uoffset_t>(mid));
    if (!format::add_u64(off, nbytes, &end) || end > static_cast<std::uint64_t>(buffer_size)) {
      invalid(F, "S4 (tensor)", vw + ": planned memory [" + u64s(off) + ", +" + u64s(nbytes) + ") exceeds buffer " +
                                    u64s(mid) + " of " + std::to_string(buffer_size) + " bytes");
    }
  }
  if (t->data_buffer_idx() > 0) check_tensor_data(b.prog, F, vw, t, nbytes);
  check_external(vw, t, b.reasons);
  vs.tensor.dtype = static_cast<DType>(t->scalar_type());
  for (auto s : *t->sizes()) vs.tensor.sizes.push_back(s);
  for (auto d : *t->dim_order()) vs.tensor.dim_order.push_back(d);
  vs.tensor.dynamic = dyn == 1;
}

void Program::Impl::read_io(format::MethodBuild& b) {
  const auto* inputs = b.plan->inputs();
  const auto* outputs = b.plan->outputs();
  MethodSpec& m = b.m;
  auto check_index = [&](std::int64_t idx, const std::string& field) { b.check_index(idx, field); };
  for (flatbuffers::uoffset_t i = 0; i < inputs->size(); ++i) {
    check_index(inputs->Get(i), "inputs[" + std::to_string(i) + "]");
    m.inputs.push_back(m.values[static_cast<std::size_t>(inputs->Get(i))]);
  }
  for (flatbuffers::uoffset_t i = 0; i < outputs->size(); ++i) {
    check_index(outputs->Get(i), "outputs[" + std::to_string(i) + "]");
    m.outputs.push_back(m.values[static_cast<std::size_t>(outputs->Get(i))]);
  }
}

void Program::Impl::check_delegates(format::MethodBuild& b) {
  const std::string& F = b.pte->label;
  const std::string& where = b.where;
  const et::Program* prog = b.prog;
  const auto* delegates = b.plan->delegates();
  for (flatbuffers::uoffset_t di = 0; di < delegates->size(); ++di) {
    const et::BackendDelegate* d = delegates->Get(di);
    const std::string dw = where + " delegates[" + std::to_string(di) + "]";
    if (d->id() == nullptr || d->id()->size() == 0) invalid(F, "S8 (delegate)", dw + ": id is missing or empty at offset " + u64s(pte.fb_offset_of(d)));
    const et::BackendDelegateDataReference* ref = d->processed();
    if (ref == nullptr) invalid(F, "S8 (delegate)", dw + ": processed is missing at offset " + u64s(pte.fb_offset_of(d)));
    const int loc = static_cast<int>(ref->location());
    if (loc == 0) {
      const auto* inl = prog->backend_delegate_data();
      if (inl == nullptr || ref->index() >= inl->size()) {
        invalid(F, "S8 (delegate)", dw + ": INLINE processed index " + std::to_string(ref->index()) + " is out of range (" +
                                        std::to_string(inl ? inl->size() : 0) + " backend_delegate_data entries)");
      }
      if (inl->Get(ref->index())->data() == nullptr) {
        invalid(F, "S8 (delegate)", dw + ": backend_delegate_data[" + std::to_string(ref->index()) + "].data is missing");
      }
    } else if (loc == 1) {
      const auto* s = prog->segments();
      if (s == nullptr || ref->index() >= s->size()) {
        invalid(F, "S8 (delegate)", dw + ": SEGMENT processed index " + std::to_string(ref->index()) + " is out of range (" +
                                        std::to_string(s ? s->size() : 0) + " segments)");
      }
    } else {
      invalid(F, "S8 (delegate)", dw + ": processed.location " + std::to_string(loc) + " is not INLINE(0) or SEGMENT(1)");
    }
    if (const auto* specs = d->compile_specs()) {
      for (flatbuffers::uoffset_t k = 0; k < specs->size(); ++k) {
        if (specs->Get(k)->key() == nullptr || specs->Get(k)->value() == nullptr) {
          invalid(F, "S8 (delegate)", dw + ": compile_specs[" + std::to_string(k) + "] key or value is missing");
        }
      }
    }
  }
}

/// M2: a constant stored outside the program (ExtraTensorInfo.location ==
/// EXTERNAL, not memory-planned) must come from a .ptd entry whose
/// TensorLayout equals the tensor's dtype, sizes and dim_order. This SDK does
/// not feed such constants to delegates, so the method is not runnable.
void Program::Impl::check_external(const std::string& vw, const et::Tensor* t, std::vector<std::string>& reasons) {
  const et::ExtraTensorInfo* x = t->extra_tensor_info();
  if (x == nullptr || x->location() != et::TensorDataLocation::EXTERNAL || t->allocation_info() != nullptr) return;
  const std::string fqn = x->fully_qualified_name()->str();  // non-empty: checked in S4
  const std::string& F = pte.label;
  auto it = named.find(fqn);
  if (it == named.end() || !it->second.in_ptd) {
    const std::string msg = vw + " is an external constant " + quoted(fqn) + " that no .ptd data file provides";
    if (require_data) throw Error(ErrorCode::kNotFound, F + ": " + msg);
    reasons.push_back(msg);
    return;
  }
  const format::NamedEntry& e = it->second;
  if (!e.has_layout) {
    invalid(e.file, "M2 (external constant)", "entry " + quoted(fqn) + " used by " + F + " " + vw + " has no tensor_layout");
  }
  std::vector<int64_t> sizes(t->sizes()->begin(), t->sizes()->end());
  std::vector<std::uint8_t> order(t->dim_order()->begin(), t->dim_order()->end());
  if (e.layout_dtype != static_cast<int>(t->scalar_type()) || e.layout_sizes != sizes || e.layout_dim_order != order) {
    invalid(e.file, "M2 (external constant)",
            "layout of " + quoted(fqn) + " differs from " + F + " " + vw + " (dtype, sizes or dim_order)");
  }
  reasons.push_back(vw + " is an external constant (" + quoted(fqn) + "); constants outside the CUDA delegate are not supported");
}

}  // namespace aoti_cuda
