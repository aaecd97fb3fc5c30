// Weights upload through pinned staging slots. See weight_upload.hpp.
#include "runtime/weight_upload.hpp"

#include <cuda_runtime_api.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

#include "aoti_cuda/error.hpp"
#include "common/cuda.hpp"
#include "format/mapped_file.hpp"

namespace aoti_cuda::runtime {
namespace {

constexpr int kMemcpyHostToDevice = 1;  // cudaMemcpyHostToDevice
constexpr int kMemcpyDefault = 4;       // cudaMemcpyDefault
// upload_thresholds(): below 8 MiB of recorded bytes, threads and pinned
// slots cost more than they save.
std::atomic<std::size_t> g_stage_from{std::size_t{4} << 20};
std::atomic<std::size_t> g_pipeline_from{std::size_t{8} << 20};
constexpr int kMaxThreads = 8;

thread_local WeightUploadScope* t_scope = nullptr;

// The first failure of the pipeline, kept by whichever thread saw it: a CUDA
// error (code) or a file read error (io, with code cudaSuccess).
struct FirstError {
  std::mutex mutex;
  cudaError_t code = cudaSuccess;
  std::string what;
  std::string io;
  std::atomic<bool> failed{false};
  void set(cudaError_t err, const char* call) {
    std::lock_guard<std::mutex> lock(mutex);
    if (failed.load()) return;
    code = err;
    what = call;
    failed.store(true);
  }
  void set_io(std::string message) {
    std::lock_guard<std::mutex> lock(mutex);
    if (failed.load()) return;
    io = std::move(message);
    failed.store(true);
  }
};

// Reads n bytes at `offset` of fd into dst; "" on success, else why not.
std::string read_exactly(int fd, std::uint8_t* dst, std::size_t n, std::uint64_t offset) {
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, dst + got, n - got, static_cast<off_t>(offset + got));
    if (r > 0) {
      got += static_cast<std::size_t>(r);
    } else if (r == 0) {
      return "the file ended at byte " + std::to_string(offset + got) + " (was it truncated while loaded?)";
    } else if (errno != EINTR) {
      return std::string("pread at byte ") + std::to_string(offset + got) + " failed: " + std::strerror(errno);
    }
  }
  return {};
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14; older kernels answer EINVAL
#endif

// Maps the pages of [p, p+n) into the process in one call; best effort (a
// fault during the copy does the same, page by page).
void populate_source(const std::uint8_t* p, std::size_t n, std::atomic<bool>& unsupported) {
  if (unsupported.load(std::memory_order_relaxed) || n == 0) return;
  static const std::uintptr_t page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const std::uintptr_t begin = reinterpret_cast<std::uintptr_t>(p) / page * page;
  const std::uintptr_t end = reinterpret_cast<std::uintptr_t>(p) + n;
  if (::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ) != 0 && errno == EINVAL) {
    unsupported.store(true, std::memory_order_relaxed);
  }
}

}  // namespace

int default_upload_threads() noexcept {
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, static_cast<unsigned>(kMaxThreads)));
}

std::size_t staging_slot_bytes(std::size_t total, int threads) noexcept {
  constexpr std::size_t kMin = std::size_t{1} << 20, kMax = std::size_t{4} << 20;
  const std::size_t want = total / (32 * static_cast<std::size_t>(std::max(threads, 1)));
  std::size_t slot = kMin;
  while (slot * 2 <= want && slot < kMax) slot *= 2;
  return slot;
}

StagingBlocks::StagingBlocks(int device, int threads, std::size_t slot_bytes, StagingMemory memory)
    : threads_(std::max(threads, 1)), slot_bytes_(std::max<std::size_t>(slot_bytes, 1)) {
  blocks_.resize(static_cast<std::size_t>(threads_));
  try {
    thread_ = std::thread(&StagingBlocks::allocate_all, this, device, memory);
  } catch (const std::system_error&) {
    allocate_all(device, memory);  // no thread for it: allocate now
  }
}

void StagingBlocks::allocate_all(int device, StagingMemory memory) {
  for (int i = 0; i < threads_; ++i) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) break;
    }
    StagingBlock b = StagingBlock::allocate(device, 2 * slot_bytes_, memory);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      blocks_[static_cast<std::size_t>(i)] = b;
      decided_ = i + 1;
    }
    ready_cv_.notify_all();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  decided_ = threads_;  // stopped early: the rest stay empty
  ready_cv_.notify_all();
}

std::unique_ptr<StagingBlocks> StagingBlocks::for_blob(int device, std::size_t blob_bytes,
                                                      const StagedUploadOptions& options) noexcept {
  const int threads = options.threads > 0 ? options.threads : default_upload_threads();
  try {
    const std::size_t slot = options.slot_bytes > 0 ? options.slot_bytes : staging_slot_bytes(blob_bytes, threads);
    return std::make_unique<StagingBlocks>(device, threads, slot, options.memory);
  } catch (const std::exception&) {
    return nullptr;
  }
}

std::uint8_t* StagingBlocks::wait(int i) {
  if (i < 0 || i >= threads_) return nullptr;
  std::unique_lock<std::mutex> lock(mutex_);
  ready_cv_.wait(lock, [&] { return decided_ > i; });
  return static_cast<std::uint8_t*>(blocks_[static_cast<std::size_t>(i)].ptr);
}

StagingBlocks::~StagingBlocks() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
  for (StagingBlock& b : blocks_) b.release();
}

namespace {

#ifndef MADV_HUGEPAGE
#define MADV_HUGEPAGE 14
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels answer EINVAL
#endif

// Anonymous memory aligned to 2 MiB, asked to be backed by transparent huge
// pages and populated (every page allocated now, so that registering it
// pins memory that exists), then registered. ptr null when any step fails.
StagingBlock huge_page_block(std::size_t bytes) noexcept {
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  StagingBlock b;
  const std::size_t len = (bytes + kHuge - 1) / kHuge * kHuge;
  void* raw = ::mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return b;
  auto* p = reinterpret_cast<std::uint8_t*>((reinterpret_cast<std::uintptr_t>(raw) + kHuge - 1) / kHuge * kHuge);
  (void)::madvise(p, len, MADV_HUGEPAGE);  // best effort: 4 KiB pages still work, only slower to pin
  if (::madvise(p, len, MADV_POPULATE_WRITE) != 0) {
    for (std::size_t at = 0; at < len; at += 4096) p[at] = 0;  // older kernels: fault each page in
  }
  if (cudaHostRegister(p, len, cudaHostRegisterDefault) != cudaSuccess) {
    (void)cudaGetLastError();
    ::munmap(raw, len + kHuge);
    return b;
  }
  b.ptr = p;
  b.bytes = bytes;
  b.memory = StagingMemory::kHugePages;
  b.mapping = raw;
  b.mapping_bytes = len + kHuge;
  return b;
}

}  // namespace

const char* staging_memory_name(StagingMemory m) noexcept {
  switch (m) {
    case StagingMemory::kHugePages: return "huge pages, registered";
    case StagingMemory::kWriteCombined: return "cudaHostAlloc, write-combined";
    case StagingMemory::kHostAlloc: return "cudaHostAlloc";
  }
  return "?";
}

StagingBlock StagingBlock::allocate(int device, std::size_t bytes, StagingMemory memory) noexcept {
  common::DeviceGuard guard(device, common::DeviceGuard::OnFailure::kIgnore);
  if (memory == StagingMemory::kHugePages) {
    StagingBlock b = huge_page_block(bytes);
    if (b.ptr != nullptr) return b;
    memory = StagingMemory::kWriteCombined;
  }
  StagingBlock b;
  b.memory = memory;
  const unsigned flags = memory == StagingMemory::kWriteCombined ? cudaHostAllocWriteCombined : cudaHostAllocDefault;
  if (cudaHostAlloc(&b.ptr, bytes, flags) == cudaSuccess) {
    b.bytes = bytes;
  } else {
    b.ptr = nullptr;
    (void)cudaGetLastError();
  }
  return b;
}

void StagingBlock::release() noexcept {
  if (ptr != nullptr) {
    if (mapping != nullptr) {
      (void)cudaHostUnregister(ptr);
      ::munmap(mapping, mapping_bytes);
    } else {
      (void)cudaFreeHost(ptr);
    }
  }
  ptr = nullptr;
  bytes = 0;
  mapping = nullptr;
  mapping_bytes = 0;
}

namespace {

// Plain synchronous copies of the given chunks, as the model library would
// have made them: the fallback when no staging memory can be had.
cudaError_t copy_directly(const std::vector<RecordedCopy>& copies, const std::vector<std::vector<ChunkPiece>>& chunks,
                          std::size_t first_chunk) {
  for (std::size_t c = first_chunk; c < chunks.size(); ++c) {
    for (const ChunkPiece& p : chunks[c]) {
      const RecordedCopy& r = copies[p.copy];
      const cudaError_t err = cudaMemcpy(static_cast<std::uint8_t*>(r.dst) + p.offset, r.src + p.offset, p.bytes,
                                         cudaMemcpyHostToDevice);
      if (err != cudaSuccess) return err;
    }
  }
  return cudaSuccess;
}

// One copy thread: its own stream, two pinned slots used in turn; takes chunks
// from the shared counter until none are left or a thread failed. A thread
// that cannot set itself up takes no chunk (the others, or the fallback, do them).
void copy_worker(const std::vector<RecordedCopy>& copies, const std::vector<std::vector<ChunkPiece>>& chunks,
                 std::atomic<std::size_t>& next, int device, const StagedUploadOptions& options, const FileSource* file,
                 StagingBlocks& staging, int index, FirstError& error, std::atomic<int>& running,
                 std::atomic<bool>& no_populate) {
  const std::size_t slot_bytes = staging.slot_bytes();
  std::uint8_t* const pinned = staging.wait(index);
  if (pinned == nullptr) return;  // no block for this thread: the others (or the fallback) copy
  if (cudaSetDevice(device) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  cudaStream_t stream = nullptr;
  cudaEvent_t done[2] = {nullptr, nullptr};
  bool ready = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess &&
               cudaEventCreateWithFlags(&done[0], cudaEventDisableTiming) == cudaSuccess &&
               cudaEventCreateWithFlags(&done[1], cudaEventDisableTiming) == cudaSuccess;
  if (!ready) (void)cudaGetLastError();
  if (ready) {
    running.fetch_add(1);
    for (std::size_t round = 0; !error.failed.load(std::memory_order_relaxed); ++round) {
      const std::size_t c = next.fetch_add(1);
      if (c >= chunks.size()) break;
      const int k = static_cast<int>(round & 1);
      // The slot's previous transfer must have left it before it is refilled.
      if (round >= 2) {
        const cudaError_t err = cudaEventSynchronize(done[k]);
        if (err != cudaSuccess) {
          error.set(err, "cudaEventSynchronize");
          break;
        }
      }
      std::uint8_t* slot = pinned + k * slot_bytes;
      std::size_t at = 0;
      for (const ChunkPiece& p : chunks[c]) {
        const std::uint8_t* src = copies[p.copy].src + p.offset;
        if (file != nullptr) {
          std::string why = read_exactly(file->fd, slot + at, p.bytes, file->offset + (src - file->base));
          if (!why.empty()) {
            error.set_io(std::move(why));
            break;
          }
        } else {
          if (options.populate) populate_source(src, p.bytes, no_populate);
          std::memcpy(slot + at, src, p.bytes);
        }
        at += p.bytes;
      }
      if (error.failed.load(std::memory_order_relaxed)) break;
      at = 0;
      cudaError_t err = cudaSuccess;
      for (const ChunkPiece& p : chunks[c]) {
        err = cudaMemcpyAsync(static_cast<std::uint8_t*>(copies[p.copy].dst) + p.offset, slot + at, p.bytes,
                              cudaMemcpyHostToDevice, stream);
        if (err != cudaSuccess) break;
        at += p.bytes;
      }
      if (err == cudaSuccess) err = cudaEventRecord(done[k], stream);
      if (err != cudaSuccess) {
        error.set(err, "cudaMemcpyAsync");
        break;
      }
    }
    const cudaError_t err = cudaStreamSynchronize(stream);
    if (err != cudaSuccess) error.set(err, "cudaStreamSynchronize");
  }
  for (cudaEvent_t e : done) {
    if (e != nullptr) (void)cudaEventDestroy(e);
  }
  if (stream != nullptr) (void)cudaStreamDestroy(stream);
}

// The pipeline, with `staging` or, when none is given, with blocks allocated
// here. Returns the first CUDA failure and names its call in *what; a file
// read failure in *io_error.
cudaError_t run_upload(const std::vector<RecordedCopy>& copies, int device, const StagedUploadOptions& options,
                       const FileSource& file, StagingBlocks* staging, StagedUploadResult* result, std::string* what,
                       std::string* io_error) {
  std::size_t total = 0;
  for (const RecordedCopy& r : copies) total += r.bytes;
  result->bytes = total;
  if (total == 0) return cudaSuccess;
  int threads = staging != nullptr ? staging->threads() : options.threads > 0 ? options.threads : default_upload_threads();
  const std::size_t slot = staging != nullptr ? staging->slot_bytes()
                           : options.slot_bytes > 0 ? options.slot_bytes
                                                    : staging_slot_bytes(total, threads);
  const std::vector<std::vector<ChunkPiece>> chunks = plan_chunks(copies, slot);
  if (total < g_pipeline_from.load() || threads < 1) {
    result->fallback = "too few weight bytes for the pinned pipeline: copied directly";
    *what = "cudaMemcpy";
    return copy_directly(copies, chunks, 0);
  }
  threads = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(threads), chunks.size()));
  std::unique_ptr<StagingBlocks> own;
  if (staging == nullptr) {
    try {
      own = std::make_unique<StagingBlocks>(device, threads, slot, options.memory);
    } catch (const std::exception&) {
      result->fallback = "no pinned staging memory could be had: copied directly";
      *what = "cudaMemcpy";
      return copy_directly(copies, chunks, 0);
    }
    staging = own.get();
  }
  std::atomic<std::size_t> next{0};
  std::atomic<int> running{0};
  std::atomic<bool> no_populate{false};
  FirstError error;
  const FileSource* source = options.read_file && file.fd >= 0 && file.base != nullptr ? &file : nullptr;
  result->read_file = source != nullptr;
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads));
  try {
    for (int i = 0; i < threads; ++i) {
      pool.emplace_back(copy_worker, std::cref(copies), std::cref(chunks), std::ref(next), device, std::cref(options),
                        source, std::ref(*staging), i, std::ref(error), std::ref(running), std::ref(no_populate));
    }
  } catch (const std::system_error&) {
    // Fewer threads than asked for (or none): those started do the work, the fallback the rest.
  }
  for (std::thread& t : pool) t.join();
  result->threads = running.load();
  if (!error.io.empty()) {
    *io_error = error.io;
    return cudaSuccess;
  }
  if (error.code != cudaSuccess) {
    *what = error.what;
    return error.code;
  }
  const std::size_t done = std::min(next.load(), chunks.size());
  if (done < chunks.size()) {
    // Only when no thread could set itself up: some chunks were never taken.
    result->fallback = "no pinned staging block or copy stream could be had: copied directly";
    *what = "cudaMemcpy";
    return copy_directly(copies, chunks, done);
  }
  return cudaSuccess;
}

void throw_on_failure(cudaError_t err, const StagedUploadResult& result, const std::string& what,
                      const std::string& io_error) {
  if (!io_error.empty()) {
    throw Error(ErrorCode::kIo, "reading " + std::to_string(result.bytes) + " weight bytes from the file: " + io_error);
  }
  if (err != cudaSuccess) {
    throw common::cuda_error(err, "uploading " + std::to_string(result.bytes) + " weight bytes (" + what + ")");
  }
}

}  // namespace

UploadThresholds upload_thresholds() noexcept { return {g_stage_from.load(), g_pipeline_from.load()}; }

void set_upload_thresholds(UploadThresholds t) noexcept {
  g_stage_from.store(t.stage_from);
  g_pipeline_from.store(t.pipeline_from);
}

std::vector<std::vector<ChunkPiece>> plan_chunks(const std::vector<RecordedCopy>& copies, std::size_t chunk_bytes) {
  std::vector<std::vector<ChunkPiece>> chunks;
  std::size_t room = 0;  // bytes left in the last chunk
  for (std::size_t i = 0; i < copies.size(); ++i) {
    for (std::size_t offset = 0; offset < copies[i].bytes;) {
      if (room == 0) {
        chunks.emplace_back();
        room = chunk_bytes;
      }
      const std::size_t n = std::min(room, copies[i].bytes - offset);
      chunks.back().push_back(ChunkPiece{i, offset, n});
      offset += n;
      room -= n;
    }
  }
  return chunks;
}

StagedUploadResult upload_staged(const std::vector<RecordedCopy>& copies, int device,
                                 const StagedUploadOptions& options, const FileSource& file, StagingBlocks* staging) {
  StagedUploadResult result;
  std::string what, io_error;
  const cudaError_t err = run_upload(copies, device, options, file, staging, &result, &what, &io_error);
  throw_on_failure(err, result, what, io_error);
  return result;
}

WeightUploadScope::WeightUploadScope(ByteView blob, int device, StagingBlocks* staging,
                                     const StagedUploadOptions& options)
    : blob_(blob), device_(device), options_(options), previous_(t_scope), staging_(staging) {
  t_scope = this;
  file_.fd = format::reopen_file_of(blob.data, blob.size, &file_.offset);
  file_.base = blob.data;
  // Without blocks from the owner, they are allocated while the model
  // library works (it allocates the device copy of the blob first), not after it.
  if (staging_ == nullptr && device >= 0 && blob.size >= g_pipeline_from.load()) {
    own_staging_ = StagingBlocks::for_blob(device, blob.size, options_);  // null: flush() allocates instead
    staging_ = own_staging_.get();
  }
}

WeightUploadScope::~WeightUploadScope() {
  if (t_scope == this) t_scope = previous_;
  if (file_.fd >= 0) ::close(file_.fd);
}

const std::vector<RecordedCopy>& WeightUploadScope::recorded() const noexcept { return copies_; }

StagedUploadResult WeightUploadScope::flush() {
  // Stop recording first: the copies below (and anything else this thread
  // does from now on) must reach libcudart.
  if (t_scope == this) t_scope = previous_;
  std::vector<RecordedCopy> copies;
  copies.swap(copies_);
  StagedUploadResult result;
  std::string what, io_error;
  const cudaError_t err = run_upload(copies, device_, options_, file_, staging_, &result, &what, &io_error);
  own_staging_.reset();
  staging_ = nullptr;
  throw_on_failure(err, result, what, io_error);
  return result;
}

bool WeightUploadScope::offer(void* dst, const void* src, std::size_t bytes, int kind) noexcept {
  WeightUploadScope* s = t_scope;
  if (s == nullptr || (kind != kMemcpyHostToDevice && kind != kMemcpyDefault) || bytes == 0) return false;
  const auto* p = static_cast<const std::uint8_t*>(src);
  const std::uint8_t* begin = s->blob_.data;
  // Inside the blob, without overflow: p >= begin and bytes <= what is left after p.
  if (begin == nullptr || p < begin || static_cast<std::size_t>(p - begin) > s->blob_.size ||
      bytes > s->blob_.size - static_cast<std::size_t>(p - begin)) {
    return false;
  }
  try {
    s->copies_.push_back(RecordedCopy{dst, p, bytes});
  } catch (...) {
    return false;  // out of host memory for the record: let the copy run now
  }
  return true;
}

int WeightUploadScope::flush_before_other_copy() noexcept {
  WeightUploadScope* s = t_scope;
  if (s == nullptr || s->copies_.empty()) return 0;
  StagedUploadResult result;
  std::string what, io_error;
  std::vector<RecordedCopy> copies;
  copies.swap(s->copies_);
  // Still recording afterwards: the scope stays active for the library's later copies.
  t_scope = nullptr;
  cudaError_t err;
  try {
    err = run_upload(copies, s->device_, s->options_, s->file_, s->staging_, &result, &what, &io_error);
  } catch (...) {
    err = cudaErrorMemoryAllocation;  // out of host memory planning the chunks
  }
  t_scope = s;
  // A file read error has no cudart code: the library sees an invalid value.
  if (err == cudaSuccess && !io_error.empty()) err = cudaErrorInvalidValue;
  return static_cast<int>(err);
}

}  // namespace aoti_cuda::runtime
