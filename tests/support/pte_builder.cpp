#include "support/pte_builder.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <stdexcept>

#include "aoti_cuda_schema/flat_tensor_generated.h"
#include "aoti_cuda_schema/program_generated.h"

namespace aoti_cuda_test {

namespace et = executorch_flatbuffer;
namespace ft = flat_tensor_flatbuffer;
using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

namespace {

constexpr std::uint64_t kSegmentAlignment = 128;

std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

// Deterministic 64-hex-digit key from bytes (stands in for sha256 hexdigest:
// the reader treats keys as opaque strings).
std::string hex_key(const Bytes& b, const std::string& salt) {
  std::string out;
  std::uint64_t h = 1469598103934665603ULL;
  for (char c : salt) h = (h ^ static_cast<std::uint8_t>(c)) * 1099511628211ULL;
  for (auto c : b) h = (h ^ c) * 1099511628211ULL;
  for (int i = 0; i < 4; ++i) {
    char buf[17];
    h = h * 6364136223846793005ULL + 1442695040888963407ULL;
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    out += buf;
  }
  return out;
}

// Splices `header` (already padded) in at byte 8 and adds its length to the root offset.
Bytes splice_header(const std::uint8_t* fb, std::size_t fb_size, const Bytes& header) {
  Bytes out;
  out.reserve(fb_size + header.size());
  out.insert(out.end(), fb, fb + 8);
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), fb + 8, fb + fb_size);
  put_u32(out, 0, get_u32(out, 0) + static_cast<std::uint32_t>(header.size()));
  return out;
}

struct SegmentPlan {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> entries;  // offset, size (relative)
  std::vector<const Bytes*> data;
  std::uint64_t end = 0;
  std::uint32_t add(const Bytes& b) {
    const std::uint64_t off = entries.empty() ? 0 : align_up(end, kSegmentAlignment);
    entries.emplace_back(off, b.size());
    data.push_back(&b);
    end = off + b.size();
    return static_cast<std::uint32_t>(entries.size() - 1);
  }
};

void append_segments(Bytes& file, std::uint64_t base, const SegmentPlan& segs) {
  file.resize(base, 0);
  for (std::size_t i = 0; i < segs.entries.size(); ++i) {
    file.resize(base + segs.entries[i].first, 0);
    file.insert(file.end(), segs.data[i]->begin(), segs.data[i]->end());
  }
}

Offset<et::Tensor> build_tensor(FlatBufferBuilder& fbb, const TensorDesc& t) {
  Offset<flatbuffers::Vector<std::int32_t>> sizes;
  Offset<flatbuffers::Vector<std::uint8_t>> dim_order;
  if (!t.omit_sizes) sizes = fbb.CreateVector(t.sizes);
  if (!t.omit_dim_order) {
    std::vector<std::uint8_t> order = t.dim_order;
    if (order.empty()) {
      for (std::size_t i = 0; i < t.sizes.size(); ++i) order.push_back(static_cast<std::uint8_t>(i));
    }
    dim_order = fbb.CreateVector(order);
  }
  Offset<et::ExtraTensorInfo> extra;
  if (!t.external_fqn.empty()) {
    extra = et::CreateExtraTensorInfo(fbb, 0, fbb.CreateString(t.external_fqn), et::TensorDataLocation::EXTERNAL);
  }
  Offset<et::AllocationDetails> alloc;
  if (t.allocation) {
    alloc = et::CreateAllocationDetails(fbb, t.allocation->first, static_cast<std::uint32_t>(t.allocation->second),
                                        static_cast<std::uint32_t>(t.allocation->second >> 32));
  }
  et::TensorBuilder tb(fbb);
  tb.add_scalar_type(static_cast<et::ScalarType>(t.dtype));
  tb.add_storage_offset(t.storage_offset);
  if (!t.omit_sizes) tb.add_sizes(sizes);
  if (!t.omit_dim_order) tb.add_dim_order(dim_order);
  if (t.allocation) tb.add_allocation_info(alloc);
  tb.add_shape_dynamism(static_cast<et::TensorShapeDynamism>(t.shape_dynamism));
  tb.add_data_buffer_idx(t.data_buffer_idx);
  if (!t.external_fqn.empty()) tb.add_extra_tensor_info(extra);
  return tb.Finish();
}

Offset<et::EValue> build_value(FlatBufferBuilder& fbb, const ValueDesc& v) {
  using K = ValueDesc::Kind;
  flatbuffers::Offset<void> payload;
  et::KernelTypes tag = et::KernelTypes::NONE;
  switch (v.kind) {
    case K::kTensor: payload = build_tensor(fbb, v.tensor).Union(); tag = et::KernelTypes::Tensor; break;
    case K::kNull: payload = et::CreateNull(fbb).Union(); tag = et::KernelTypes::Null; break;
    case K::kInt: payload = et::CreateInt(fbb, v.int_value).Union(); tag = et::KernelTypes::Int; break;
    case K::kDouble: payload = et::CreateDouble(fbb, static_cast<double>(v.int_value)).Union(); tag = et::KernelTypes::Double; break;
    case K::kBool: payload = et::CreateBool(fbb, v.int_value != 0).Union(); tag = et::KernelTypes::Bool; break;
    case K::kString: payload = et::CreateStringDirect(fbb, "s").Union(); tag = et::KernelTypes::String; break;
    case K::kIntList: {
      std::vector<std::int64_t> items(v.items.begin(), v.items.end());
      payload = et::CreateIntListDirect(fbb, &items).Union();
      tag = et::KernelTypes::IntList;
      break;
    }
    case K::kTensorList: payload = et::CreateTensorListDirect(fbb, &v.items).Union(); tag = et::KernelTypes::TensorList; break;
    case K::kOptionalTensorList:
      payload = et::CreateOptionalTensorListDirect(fbb, &v.items).Union();
      tag = et::KernelTypes::OptionalTensorList;
      break;
  }
  et::EValueBuilder eb(fbb);
  eb.add_val_type(v.raw_tag >= 0 ? static_cast<et::KernelTypes>(v.raw_tag) : tag);
  if (!v.omit_payload) eb.add_val(payload);
  return eb.Finish();
}

Offset<et::Instruction> build_instruction(FlatBufferBuilder& fbb, const InstrDesc& in) {
  using K = InstrDesc::Kind;
  flatbuffers::Offset<void> payload;
  et::InstructionArguments tag = et::InstructionArguments::NONE;
  const std::vector<std::int32_t>* args = in.omit_args ? nullptr : &in.args;
  switch (in.kind) {
    case K::kDelegate:
      payload = et::CreateDelegateCallDirect(fbb, in.index, args).Union();
      tag = et::InstructionArguments::DelegateCall;
      break;
    case K::kKernel:
      payload = et::CreateKernelCallDirect(fbb, in.index, args).Union();
      tag = et::InstructionArguments::KernelCall;
      break;
    case K::kMove:
      payload = et::CreateMoveCall(fbb, in.index, in.second).Union();
      tag = et::InstructionArguments::MoveCall;
      break;
    case K::kJumpFalse:
      payload = et::CreateJumpFalseCall(fbb, in.index, in.second).Union();
      tag = et::InstructionArguments::JumpFalseCall;
      break;
    case K::kFree:
      payload = et::CreateFreeCall(fbb, in.index).Union();
      tag = et::InstructionArguments::FreeCall;
      break;
  }
  et::InstructionBuilder ib(fbb);
  ib.add_instr_args_type(in.raw_tag >= 0 ? static_cast<et::InstructionArguments>(in.raw_tag) : tag);
  ib.add_instr_args(payload);
  return ib.Finish();
}

}  // namespace

Bytes to_bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

TensorDesc f32(std::vector<std::int32_t> sizes) { TensorDesc t; t.dtype = 6; t.sizes = std::move(sizes); return t; }
TensorDesc i64(std::vector<std::int32_t> sizes) { TensorDesc t; t.dtype = 4; t.sizes = std::move(sizes); return t; }
TensorDesc bf16(std::vector<std::int32_t> sizes) { TensorDesc t; t.dtype = 15; t.sizes = std::move(sizes); return t; }

DelegateDesc cuda_delegate(const CudaBlobs& blobs) {
  DelegateDesc d;
  d.id = "CudaBackend";
  d.processed = blobs.processed;
  d.processed_in_segment = blobs.processed_in_segment;
  if (!blobs.method_name.empty()) d.compile_specs.emplace_back("method_name", to_bytes(blobs.method_name));
  return d;
}

MethodDesc cuda_method(const std::string& name, const std::vector<TensorDesc>& inputs,
                       const std::vector<TensorDesc>& outputs, const CudaBlobs& blobs) {
  MethodDesc m;
  m.name = name;
  InstrDesc call;
  call.kind = InstrDesc::Kind::kDelegate;
  call.index = 0;
  for (const auto& t : inputs) {
    m.inputs.push_back(static_cast<std::int32_t>(m.values.size()));
    call.args.push_back(static_cast<std::int32_t>(m.values.size()));
    m.values.push_back(ValueDesc::of(t));
  }
  for (const auto& t : outputs) {
    m.outputs.push_back(static_cast<std::int32_t>(m.values.size()));
    call.args.push_back(static_cast<std::int32_t>(m.values.size()));
    m.values.push_back(ValueDesc::of(t));
  }
  m.instructions.push_back(call);
  m.delegates.push_back(cuda_delegate(blobs));
  return m;
}

MethodDesc fake_kv_method(const std::string& name, const CudaBlobs& blobs) {
  MethodDesc m;
  m.name = name;
  m.values = {ValueDesc::of(f32({1, 4})), ValueDesc::of(i64({1})), ValueDesc::of(f32({4}))};
  m.inputs = {0, 1};
  m.outputs = {2};
  InstrDesc call;
  call.kind = InstrDesc::Kind::kDelegate;
  call.index = 0;
  call.args = {1, 0, 2};
  m.instructions.push_back(call);
  m.delegates.push_back(cuda_delegate(blobs));
  return m;
}

PteBuilder& PteBuilder::add_method(MethodDesc m) {
  methods_.push_back(std::move(m));
  return *this;
}

PteBuilder& PteBuilder::add_named_data(const std::string& key, Bytes bytes, Where where) {
  named_.push_back(Named{key, std::move(bytes), where, std::nullopt});
  return *this;
}

PteBuilder& PteBuilder::add_named_tensor(const std::string& key, Bytes bytes, const TensorDesc& layout) {
  named_.push_back(Named{key, std::move(bytes), Where::kPtd, layout});
  return *this;
}

std::uint32_t PteBuilder::add_raw_pte_segment(Bytes bytes) {
  raw_segments_.push_back(std::move(bytes));
  return static_cast<std::uint32_t>(raw_segments_.size() - 1);
}

CudaBlobs PteBuilder::add_cuda_blobs(aoti_cuda::ExporterGeneration generation, const std::string& method_name,
                                     const Bytes& so, const Bytes& weights, bool payload_in_segment) {
  CudaBlobs b;
  b.generation = generation;
  switch (generation) {
    case aoti_cuda::ExporterGeneration::kSeed:
      b.so_key = "so_blob";
      add_named_data(b.so_key, so, Where::kPtd);
      break;
    case aoti_cuda::ExporterGeneration::kMethodKeys:
      b.method_name = method_name;
      b.so_key = method_name + "_so_blob";
      b.weights_key = method_name + "_weights_blob";
      add_named_data(b.so_key, so, Where::kPte);
      add_named_data(b.weights_key, weights, Where::kPtd);
      break;
    case aoti_cuda::ExporterGeneration::kHashKeys:
      b.method_name = method_name;
      b.so_key = hex_key(so, "so" + std::to_string(named_.size())) + "_so_blob";
      b.weights_key = hex_key(weights, "w" + std::to_string(named_.size())) + "_weights_blob";
      add_named_data(b.so_key, so, Where::kPte);
      add_named_data(b.weights_key, weights, Where::kPtd);
      b.processed = to_bytes(b.so_key + "\n" + b.weights_key);
      b.processed_in_segment = payload_in_segment;
      break;
    case aoti_cuda::ExporterGeneration::kFqnWeights:
      throw std::logic_error("add_cuda_blobs: per-FQN weights are added with add_fqn_weights");
  }
  return b;
}

std::string FqnWeightDesc::key() const {
  if (!storage_key.empty()) return storage_key;
  return std::string("cuda_fqn_weight:") + (device_type == 0 ? "cpu:" : "cuda:") + fqn;
}

std::vector<std::int64_t> FqnWeightDesc::written_strides() const {
  if (!strides.empty()) return strides;
  std::vector<std::int64_t> out(sizes.size(), 1);
  for (std::size_t i = sizes.size(); i-- > 1;) out[i - 1] = out[i] * std::max<std::int64_t>(sizes[i], 1);
  return out;
}

Bytes encode_fqn_metadata(const std::string& so_key, const std::vector<FqnWeightDesc>& entries,
                          const std::string& magic) {
  Bytes out(magic.begin(), magic.end());
  auto u32 = [&](std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  };
  auto u64 = [&](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  };
  auto str = [&](const std::string& v) {
    u32(static_cast<std::uint32_t>(v.size()));
    out.insert(out.end(), v.begin(), v.end());
  };
  str(so_key);
  u32(static_cast<std::uint32_t>(entries.size()));
  for (const FqnWeightDesc& e : entries) {
    str(e.fqn);
    str(e.key());
    u64(e.storage_nbytes ? *e.storage_nbytes : e.storage.size());
    u32(static_cast<std::uint32_t>(e.dtype));
    u32(static_cast<std::uint32_t>(e.device_type));
    u64(static_cast<std::uint64_t>(e.storage_offset));
    u32(static_cast<std::uint32_t>(e.sizes.size()));
    for (std::int64_t v : e.sizes) u64(static_cast<std::uint64_t>(v));
    for (std::int64_t v : e.written_strides()) u64(static_cast<std::uint64_t>(v));
  }
  return out;
}

CudaBlobs PteBuilder::add_fqn_weights(const std::string& method_name, const Bytes& so,
                                      const std::vector<FqnWeightDesc>& entries, bool payload_in_segment) {
  CudaBlobs b;
  b.generation = aoti_cuda::ExporterGeneration::kFqnWeights;
  b.method_name = method_name;
  b.so_key = hex_key(so, "so" + std::to_string(named_.size())) + "_so_blob";
  add_named_data(b.so_key, so, Where::kPte);
  for (const FqnWeightDesc& e : entries) {
    const std::string key = e.key();
    const bool stored = std::any_of(named_.begin(), named_.end(), [&](const Named& n) { return n.key == key; });
    if (!stored) add_named_data(key, e.storage, Where::kPtd);
  }
  b.processed = encode_fqn_metadata(b.so_key, entries);
  b.processed_in_segment = payload_in_segment;
  return b;
}

namespace {

// A FlatTensor flatbuffer with its FH01 header (padded to 48 bytes, as the
// Python writer does) spliced in, followed by its segments.
Bytes splice_ptd(const std::uint8_t* flatbuffer, std::size_t size, const SegmentPlan& plan) {
  const std::uint64_t padded = 48;
  const std::uint64_t base = align_up(size + padded, kSegmentAlignment);
  Bytes header(padded, 0);
  std::memcpy(header.data(), "FH01", 4);
  put_u32(header, 4, 40);
  put_u64(header, 8, padded);
  put_u64(header, 16, size);
  put_u64(header, 24, base);
  put_u64(header, 32, plan.end);
  Bytes out = splice_header(flatbuffer, size, header);
  append_segments(out, base, plan);
  return out;
}

}  // namespace

BuiltProgram PteBuilder::build() const {
  BuiltProgram out;
  // ---- .pte segments: delegate payloads, then named data, then raw segments.
  SegmentPlan pte_segs;
  const bool has_constants = !constant_offsets_.empty();
  const std::uint32_t constant_segment = has_constants ? pte_segs.add(constant_data_) : 0;
  std::vector<std::vector<std::uint32_t>> delegate_index(methods_.size());
  std::vector<Bytes> inline_blobs;
  for (std::size_t mi = 0; mi < methods_.size(); ++mi) {
    for (const auto& d : methods_[mi].delegates) {
      if (d.processed_in_segment) {
        delegate_index[mi].push_back(pte_segs.add(d.processed));
      } else {
        inline_blobs.push_back(d.processed);
        delegate_index[mi].push_back(static_cast<std::uint32_t>(inline_blobs.size() - 1));
      }
    }
  }
  std::vector<std::pair<std::string, std::uint32_t>> pte_named;
  for (const auto& n : named_) {
    if (n.where == Where::kPte) pte_named.emplace_back(n.key, pte_segs.add(n.bytes));
  }
  for (const auto& r : raw_segments_) pte_segs.add(r);

  FlatBufferBuilder fbb;
  fbb.ForceDefaults(true);  // every scalar present: corruption tests can patch any field in place
  std::vector<Offset<et::ExecutionPlan>> plans;
  for (std::size_t mi = 0; mi < methods_.size(); ++mi) {
    const MethodDesc& m = methods_[mi];
    std::vector<Offset<et::EValue>> values;
    for (const auto& v : m.values) values.push_back(build_value(fbb, v));
    std::vector<Offset<et::Instruction>> instrs;
    for (const auto& in : m.instructions) instrs.push_back(build_instruction(fbb, in));
    std::vector<Offset<et::Chain>> chains;
    if (!m.empty_chains) {
      auto instr_vec = m.omit_instructions ? 0 : fbb.CreateVector(instrs);
      et::ChainBuilder cb(fbb);
      if (!m.omit_instructions) cb.add_instructions(instr_vec);
      chains.push_back(cb.Finish());
    }
    std::vector<Offset<et::Operator>> ops;
    for (const auto& o : m.operators) ops.push_back(et::CreateOperatorDirect(fbb, o.first.c_str(), o.second.c_str()));
    std::vector<Offset<et::BackendDelegate>> delegates;
    for (std::size_t di = 0; di < m.delegates.size(); ++di) {
      const DelegateDesc& d = m.delegates[di];
      std::vector<Offset<et::CompileSpec>> specs;
      for (const auto& cs : d.compile_specs) specs.push_back(et::CreateCompileSpecDirect(fbb, cs.first.c_str(), &cs.second));
      const int loc = d.raw_location >= 0 ? d.raw_location : (d.processed_in_segment ? 1 : 0);
      auto ref = et::CreateBackendDelegateDataReference(fbb, static_cast<et::DataLocation>(loc),
                                                        d.raw_index ? *d.raw_index : delegate_index[mi][di]);
      auto id = fbb.CreateString(d.id);
      auto spec_vec = fbb.CreateVector(specs);
      et::BackendDelegateBuilder bb(fbb);
      bb.add_id(id);
      if (!d.omit_processed) bb.add_processed(ref);
      bb.add_compile_specs(spec_vec);
      delegates.push_back(bb.Finish());
    }
    auto name = fbb.CreateString(m.name);
    auto values_vec = fbb.CreateVector(values);
    auto inputs_vec = fbb.CreateVector(m.inputs);
    auto outputs_vec = fbb.CreateVector(m.outputs);
    auto chains_vec = fbb.CreateVector(chains);
    auto ops_vec = fbb.CreateVector(ops);
    auto del_vec = fbb.CreateVector(delegates);
    auto ncb_vec = fbb.CreateVector(m.non_const_buffer_sizes);
    et::ExecutionPlanBuilder pb(fbb);
    if (!m.omit_name) pb.add_name(name);
    if (!m.omit_values) pb.add_values(values_vec);
    if (!m.omit_inputs) pb.add_inputs(inputs_vec);
    if (!m.omit_outputs) pb.add_outputs(outputs_vec);
    if (!m.omit_chains) pb.add_chains(chains_vec);
    pb.add_operators(ops_vec);
    if (!m.omit_delegates) pb.add_delegates(del_vec);
    if (!m.omit_non_const_buffer_sizes) pb.add_non_const_buffer_sizes(ncb_vec);
    plans.push_back(pb.Finish());
  }
  std::vector<Offset<et::BackendDelegateInlineData>> inline_data;
  for (const auto& b : inline_blobs) {
    fbb.ForceVectorAlignment(b.size(), 1, 16);
    auto v = fbb.CreateVector(b);
    inline_data.push_back(et::CreateBackendDelegateInlineData(fbb, v));
  }
  std::vector<Offset<et::DataSegment>> segs;
  for (const auto& s : pte_segs.entries) segs.push_back(et::CreateDataSegment(fbb, s.first, s.second));
  std::vector<Offset<et::NamedData>> nd;
  for (const auto& n : pte_named) nd.push_back(et::CreateNamedData(fbb, fbb.CreateString(n.first), n.second));
  auto plans_vec = fbb.CreateVector(plans);
  auto inline_vec = fbb.CreateVector(inline_data);
  auto segs_vec = fbb.CreateVector(segs);
  auto nd_vec = fbb.CreateVector(nd);
  auto cseg = et::CreateSubsegmentOffsetsDirect(fbb, constant_segment, has_constants ? &constant_offsets_ : nullptr);
  et::ProgramBuilder prb(fbb);
  prb.add_version(0);
  if (!omit_plans_) prb.add_execution_plan(plans_vec);
  prb.add_backend_delegate_data(inline_vec);
  prb.add_segments(segs_vec);
  prb.add_constant_segment(cseg);
  prb.add_named_data(nd_vec);
  fbb.Finish(prb.Finish(), et::ProgramIdentifier());

  const bool has_segments = !pte_segs.entries.empty() && pte_segs.end > 0;
  if (has_segments || force_header_) {
    Bytes header(32, 0);
    std::memcpy(header.data(), "eh00", 4);
    const std::uint64_t program_size = fbb.GetSize() + header.size();
    const std::uint64_t base = has_segments ? align_up(program_size, kSegmentAlignment) : 0;
    Bytes tmp(header);
    put_u32(tmp, 4, 32);
    put_u64(tmp, 8, program_size);
    put_u64(tmp, 16, base);
    put_u64(tmp, 24, has_segments ? pte_segs.end : 0);
    out.pte = splice_header(fbb.GetBufferPointer(), fbb.GetSize(), tmp);
    if (has_segments) append_segments(out.pte, base, pte_segs);
  } else {
    out.pte.assign(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
  }

  // ---- .ptd
  SegmentPlan ptd_segs;
  std::vector<std::pair<const Named*, std::uint32_t>> ptd_named;
  for (const auto& n : named_) {
    if (n.where != Where::kPtd) continue;
    auto same = ptd_named.end();
    if (dedupe_ptd_) {
      same = std::find_if(ptd_named.begin(), ptd_named.end(), [&](const auto& e) { return e.first->bytes == n.bytes; });
    }
    const std::uint32_t segment = same != ptd_named.end() ? same->second : ptd_segs.add(n.bytes);
    ptd_named.emplace_back(&n, segment);
  }
  out.has_ptd = !ptd_named.empty() || force_ptd_;
  if (out.has_ptd) {
    FlatBufferBuilder tb;
    tb.ForceDefaults(true);
    std::vector<Offset<ft::DataSegment>> fsegs;
    for (const auto& s : ptd_segs.entries) fsegs.push_back(ft::CreateDataSegment(tb, s.first, s.second));
    std::vector<Offset<ft::NamedData>> fnd;
    for (const auto& n : ptd_named) {
      Offset<ft::TensorLayout> layout;
      if (n.first->layout) {
        const TensorDesc& t = *n.first->layout;
        std::vector<std::uint8_t> order = t.dim_order;
        if (order.empty()) {
          for (std::size_t i = 0; i < t.sizes.size(); ++i) order.push_back(static_cast<std::uint8_t>(i));
        }
        layout = ft::CreateTensorLayoutDirect(tb, static_cast<et::ScalarType>(t.dtype), &t.sizes, &order);
      }
      fnd.push_back(ft::CreateNamedData(tb, tb.CreateString(n.first->key), n.second, layout));
    }
    auto root = ft::CreateFlatTensorDirect(tb, 0, &fsegs, &fnd);
    tb.Finish(root, ft::FlatTensorIdentifier());
    out.ptd = splice_ptd(tb.GetBufferPointer(), tb.GetSize(), ptd_segs);
  }
  return out;
}

Bytes pack_ptd(const std::uint8_t* flatbuffer, std::size_t size, const std::vector<Bytes>& segments) {
  SegmentPlan plan;
  for (const auto& b : segments) plan.add(b);
  return splice_ptd(flatbuffer, size, plan);
}

std::vector<std::uint64_t> segment_offsets(const std::vector<std::size_t>& sizes) {
  std::vector<std::uint64_t> out;
  std::uint64_t end = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const std::uint64_t off = i == 0 ? 0 : align_up(end, kSegmentAlignment);
    out.push_back(off);
    end = off + sizes[i];
  }
  return out;
}

std::string BuiltProgram::write(const std::string& dir, const std::string& stem) const {
  auto write_file = [](const std::string& path, const Bytes& b) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (!f) throw std::runtime_error("cannot write " + path);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    if (!f) throw std::runtime_error("cannot write " + path);
  };
  const std::string pte_path = dir + "/" + stem + ".pte";
  write_file(pte_path, pte);
  if (has_ptd) write_file(dir + "/aoti_cuda_blob.ptd", ptd);
  return pte_path;
}

std::uint64_t pte_segment_base(const Bytes& pte) { return get_u64(pte, 24); }
std::uint64_t ptd_segment_base(const Bytes& ptd) { return get_u64(ptd, 32); }

void put_u32(Bytes& b, std::size_t off, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b.at(off + i) = static_cast<std::uint8_t>(v >> (8 * i));
}
void put_u64(Bytes& b, std::size_t off, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b.at(off + i) = static_cast<std::uint8_t>(v >> (8 * i));
}
std::uint32_t get_u32(const Bytes& b, std::size_t off) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(b.at(off + i)) << (8 * i);
  return v;
}
std::uint64_t get_u64(const Bytes& b, std::size_t off) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(b.at(off + i)) << (8 * i);
  return v;
}

Bytes read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

Bytes float_bytes(const std::vector<float>& values) {
  Bytes b(values.size() * sizeof(float));
  std::memcpy(b.data(), values.data(), b.size());
  return b;
}


}  // namespace aoti_cuda_test
