// Private runtime: uploading a weights blob through pinned memory without
// page-locking the blob itself.
//
// AOTInductorModelUpdateConstantsFromBlob copies the blob to the device one
// constant at a time with a synchronous cudaMemcpy from the blob pointer. From
// a pageable file mapping the driver stages those copies through its own small
// pinned buffer, one at a time: several times slower than copies from pinned
// memory. Page-locking the mapping in place (cudaHostRegister) would fix the
// rate, but registering a large file mapping can stall (weights_io.hpp) and
// registering it in pieces is slow, so it stays opt-in
// (docs/design-measurements.md has the figures behind this file's choices).
//
// Instead, while a WeightUploadScope is active on the calling thread,
// the SDK's cudaMemcpy hook (which each model library's import is bound to,
// runtime/cuda_hooks.hpp) does not
// copy host-to-device ranges that lie inside the blob: it records them
// (destination, source, size) and reports success. Any other cudaMemcpy
// first carries out what was recorded, then runs (so a copy that could read a
// recorded destination sees the bytes). When the library returns, the scope's
// flush() copies every recorded range with the pipeline of upload_staged():
// several threads, each with its own stream and two slots of one pinned
// block, fill a slot with a slot-sized chunk of the blob and queue the slot's
// device copy while filling the other slot. A slot is filled with pread()
// from the blob's file when the blob is a mapped file (format::MappedFile),
// else with memcpy from the blob. The block is allocated on a background
// thread from the scope's construction on, so page-locking it overlaps the
// library's own work; it is made of huge pages because page-locking them
// costs about half of what cudaHostAlloc does (StagingMemory). Host memory
// used: the block (2 slots per thread), never a second copy of the weights;
// with pread the mapping's pages never enter the process either.
//
// Slots are 4 MiB because each device copy has a fixed cost; up to 8 threads
// fill them, which keeps the pipeline near the pinned copy rate
// (bench/upload_probe.cpp; figures in docs/design-measurements.md).
//
// If the staging memory cannot be had, the recorded copies run as the
// library would have run them (synchronous cudaMemcpy from the blob).
//
// Thread-safety: a scope belongs to the thread that made it; upload_staged
// may be called from any thread; the thresholds are process-wide atomics.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "aoti_cuda/module.hpp"
#include "aoti_cuda/program.hpp"

namespace aoti_cuda::runtime {

/// One host-to-device copy the model library asked for.
struct RecordedCopy {
  void* dst = nullptr;
  const std::uint8_t* src = nullptr;
  std::size_t bytes = 0;
};

/// A piece of a staging chunk: `bytes` of copy `copy` starting at `offset`.
struct ChunkPiece {
  std::size_t copy = 0;
  std::size_t offset = 0;
  std::size_t bytes = 0;
};

/// Splits the copies, in order, into chunks of at most `chunk_bytes` bytes
/// each (a large copy spans several chunks; small ones share one). Pure; the
/// pieces of all chunks cover every byte of every copy exactly once.
/// chunk_bytes must be > 0.
std::vector<std::vector<ChunkPiece>> plan_chunks(const std::vector<RecordedCopy>& copies, std::size_t chunk_bytes);

/// How upload_staged ran.
struct StagedUploadResult {
  std::size_t bytes = 0;  ///< bytes copied
  int threads = 0;        ///< copy threads used (0: fell back to synchronous cudaMemcpy)
  bool read_file = false; ///< slots were filled with pread from the FileSource
  std::string fallback;   ///< why the pinned pipeline was not used ("" when it was)
};

/// Where the copies' source bytes can also be read: the file whose bytes at
/// `offset` are those at `base` (a RecordedCopy's src maps to offset +
/// (src - base)). fd < 0: no file; slots are filled with memcpy.
struct FileSource {
  int fd = -1;
  std::uint64_t offset = 0;
  const std::uint8_t* base = nullptr;
};

/// How staging memory is page-locked: the public aoti_cuda::StagingMemory
/// (TuningOptions::staging). Page-locking is what a large upload waits for
/// (docs/design-measurements.md), so the default
/// is the cheapest kind that works here, kHugePages (registered huge pages,
/// one pin per 2 MiB page instead of per 4 KiB page), which falls back to
/// kWriteCombined when the registration is refused.
using StagingMemory = aoti_cuda::StagingMemory;

/// "huge pages, registered", ... (for messages).
const char* staging_memory_name(StagingMemory m) noexcept;

/// How upload_staged copies. A load sets threads and memory from its
/// TuningOptions (runtime/tuning.hpp); the rest are defaults.
struct StagedUploadOptions {
  /// Copy threads; <= 0: default_upload_threads().
  int threads = 0;
  /// Bytes per pinned slot (two per thread); 0: staging_slot_bytes() of the
  /// total. Device copies of 4 MiB run at 98% of the pinned rate, of 1 MiB
  /// at 88%, but page-locking costs about 0.35 ms per MiB.
  std::size_t slot_bytes = 0;
  /// Fill slots with pread from the FileSource when there is one.
  bool read_file = true;
  /// What the pinned slots are made of.
  StagingMemory memory = StagingMemory::kHugePages;
  /// memcpy only: each thread asks the kernel to map a chunk's source pages
  /// in one call (MADV_POPULATE_READ, Linux 5.14+) before copying it,
  /// instead of taking a page fault every few pages; ignored where unsupported.
  bool populate = true;
};

/// One page-locked host block; plain value, freed by release().
struct StagingBlock {
  void* ptr = nullptr;
  std::size_t bytes = 0;
  StagingMemory memory = StagingMemory::kWriteCombined;  ///< what it is made of (after any fallback)
  void* mapping = nullptr;        ///< kHugePages: the anonymous mapping that holds ptr
  std::size_t mapping_bytes = 0;  ///< ... and its length
  /// ptr null when refused (never throws).
  static StagingBlock allocate(int device, std::size_t bytes, StagingMemory memory) noexcept;
  void release() noexcept;
};

/// The slot size for uploading `total` bytes with `threads` threads: a
/// power of two from 1 to 4 MiB, about total / (32 * threads), so that the
/// staging (2 slots per thread) stays near 1/16 of the bytes it carries.
std::size_t staging_slot_bytes(std::size_t total, int threads) noexcept;

/// The threads upload_staged uses when not told (TuningOptions::upload_threads'
/// default): one per core up to 8 (more did not copy faster:
/// docs/design-measurements.md).
int default_upload_threads() noexcept;

/// Pinned staging for upload_staged: one block of two slots per copy thread,
/// page-locked one after another on a background thread from construction
/// on, so that copying starts once the first block is ready and the rest of
/// the page-locking overlaps the copies (and whatever the owner does
/// meanwhile: a load starts it before loading the model libraries).
/// Thread-safe; the destructor stops the allocation (waiting for the block
/// under way) and frees every block.
class StagingBlocks {
 public:
  StagingBlocks(int device, int threads, std::size_t slot_bytes, StagingMemory memory);
  ~StagingBlocks();
  StagingBlocks(const StagingBlocks&) = delete;
  StagingBlocks& operator=(const StagingBlocks&) = delete;

  /// Staging for uploading a blob of `blob_bytes` with `options`' threads,
  /// slot size and memory kind (defaults where unset); nullptr when even its
  /// bookkeeping cannot be had (the upload then allocates its own, or copies
  /// directly).
  static std::unique_ptr<StagingBlocks> for_blob(int device, std::size_t blob_bytes,
                                                 const StagedUploadOptions& options = {}) noexcept;

  int threads() const noexcept { return threads_; }
  std::size_t slot_bytes() const noexcept { return slot_bytes_; }
  /// Block i (2 * slot_bytes()), once allocated; nullptr when it could not be.
  std::uint8_t* wait(int i);

 private:
  void allocate_all(int device, StagingMemory memory);
  const int threads_;
  const std::size_t slot_bytes_;
  std::mutex mutex_;
  std::condition_variable ready_cv_;
  std::vector<StagingBlock> blocks_;  // blocks_[i] decided once i < decided_
  int decided_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

/// Copies `copies` to device `device` through pinned staging slots (see
/// above), reading the sources from `file` when given, with `staging` when
/// given (its threads and slot size then win over `options`), else with
/// blocks allocated here; returns when every byte is on the device. Throws
/// Error(kCuda/kOutOfMemory/kNoDevice) when a copy fails, Error(kIo) when
/// the file cannot be read.
StagedUploadResult upload_staged(const std::vector<RecordedCopy>& copies, int device,
                                 const StagedUploadOptions& options = {}, const FileSource& file = {},
                                 StagingBlocks* staging = nullptr);

/// The sizes from which a load records a blob's copies (`stage_from`, the
/// blob's size) and from which upload_staged uses threads and pinned slots
/// rather than direct copies (`pipeline_from`, the recorded bytes). Defaults:
/// 4 MiB and 8 MiB. Tests lower them so that the small bundled programs take
/// the path of multi-GiB models. Process-wide.
struct UploadThresholds {
  std::size_t stage_from;
  std::size_t pipeline_from;
};
UploadThresholds upload_thresholds() noexcept;
void set_upload_thresholds(UploadThresholds t) noexcept;

/// Records the calling thread's host-to-device cudaMemcpy calls from `blob`
/// while alive (see above). Not nestable; the destructor drops what was not
/// flushed (the load that owns the scope has failed by then). When the blob
/// lies in a format::MappedFile, flush() reads it from that file. The copies
/// use `staging` when given (it must outlive the scope), else blocks the
/// scope starts allocating at construction with `options`.
class WeightUploadScope {
 public:
  WeightUploadScope(ByteView blob, int device, StagingBlocks* staging = nullptr,
                    const StagedUploadOptions& options = {});
  ~WeightUploadScope();
  WeightUploadScope(const WeightUploadScope&) = delete;
  WeightUploadScope& operator=(const WeightUploadScope&) = delete;

  /// Copies what was recorded and stops recording. Throws like upload_staged.
  StagedUploadResult flush();
  /// Copies recorded so far (not yet flushed).
  const std::vector<RecordedCopy>& recorded() const noexcept;

  /// For the cudaMemcpy hook: whether the copy was taken (recorded).
  static bool offer(void* dst, const void* src, std::size_t bytes, int kind) noexcept;
  /// For the cudaMemcpy hook: carries out the recorded copies before another
  /// copy runs. Returns a cudart error code (0 on success).
  static int flush_before_other_copy() noexcept;

 private:
  ByteView blob_;
  int device_;
  StagedUploadOptions options_;
  std::vector<RecordedCopy> copies_;
  FileSource file_;  // the blob's file, reopened for the scope (it closes it); fd -1 when none
  WeightUploadScope* previous_;
  StagingBlocks* staging_;                    // what the copies use (nullptr: none could be had)
  std::unique_ptr<StagingBlocks> own_staging_;  // when none was given
};

}  // namespace aoti_cuda::runtime
