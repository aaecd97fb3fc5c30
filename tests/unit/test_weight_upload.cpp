// The weights upload path that needs no GPU to check: how recorded copies are
// cut into staging chunks, and which cudaMemcpy calls the exported hook takes
// while a WeightUploadScope is active (src/runtime/weight_upload.hpp).
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "format/mapped_file.hpp"
#include "runtime/cuda_hooks.hpp"
#include "runtime/tuning.hpp"
#include "runtime/weight_upload.hpp"
#include "support/test_util.hpp"

using aoti_cuda::ByteView;
using aoti_cuda::runtime::ChunkPiece;
using aoti_cuda::runtime::plan_chunks;
using aoti_cuda::runtime::RecordedCopy;
using aoti_cuda::runtime::WeightUploadScope;

namespace {

// True when fd was a descriptor (and closes it).
bool close_if_open(int fd) {
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

// Every byte of every copy appears exactly once, in order, and no chunk is over the limit.
void check_plan(const std::vector<RecordedCopy>& copies, std::size_t chunk_bytes) {
  const auto chunks = plan_chunks(copies, chunk_bytes);
  std::size_t copy = 0, offset = 0, total = 0;
  for (const auto& chunk : chunks) {
    std::size_t in_chunk = 0;
    REQUIRE_FALSE(chunk.empty());
    for (const ChunkPiece& p : chunk) {
      while (copy < copies.size() && offset == copies[copy].bytes) {
        ++copy;
        offset = 0;
      }
      REQUIRE(p.copy == copy);
      REQUIRE(p.offset == offset);
      REQUIRE(p.bytes > 0);
      REQUIRE(p.offset + p.bytes <= copies[p.copy].bytes);
      offset += p.bytes;
      in_chunk += p.bytes;
      total += p.bytes;
    }
    CHECK(in_chunk <= chunk_bytes);
  }
  std::size_t want = 0;
  for (const RecordedCopy& c : copies) want += c.bytes;
  CHECK(total == want);
  // Only the last chunk may be partly empty: chunks are packed.
  for (std::size_t i = 0; i + 1 < chunks.size(); ++i) {
    std::size_t n = 0;
    for (const ChunkPiece& p : chunks[i]) n += p.bytes;
    CHECK(n == chunk_bytes);
  }
}

}  // namespace

TEST_CASE("weight upload: chunk plan covers every byte once, packs small copies, splits large ones") {
  std::vector<RecordedCopy> copies = {{nullptr, nullptr, 5}, {nullptr, nullptr, 3}, {nullptr, nullptr, 10},
                                      {nullptr, nullptr, 0}, {nullptr, nullptr, 2}};
  const auto chunks = plan_chunks(copies, 4);
  REQUIRE(chunks.size() == 5);  // 20 bytes in chunks of 4
  CHECK(chunks[0].size() == 1);
  CHECK(chunks[1].size() == 2);  // the tail of copy 0 and the head of copy 1
  CHECK(chunks[1][0].copy == 0);
  CHECK(chunks[1][0].offset == 4);
  CHECK(chunks[1][1].copy == 1);
  check_plan(copies, 4);
  check_plan(copies, 1);
  check_plan(copies, 1000);
  CHECK(plan_chunks({}, 16).empty());

  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    std::vector<RecordedCopy> random(rng() % 20);
    for (RecordedCopy& c : random) c.bytes = rng() % 5000;
    check_plan(random, 1 + rng() % 3000);
  }
}

namespace {
// The hook a bound model library calls for cudaMemcpy (runtime/cuda_hooks.hpp).
cudaError_t hooked_memcpy(void* dst, const void* src, std::size_t n, cudaMemcpyKind kind) {
  static const auto fn = reinterpret_cast<decltype(&::cudaMemcpy)>(aoti_cuda::runtime::hook_function("cudaMemcpy"));
  return fn(dst, src, n, kind);
}
}  // namespace

TEST_CASE("weight upload: the cudaMemcpy hook records host-to-device copies from the blob only while a scope is active") {
  std::vector<std::uint8_t> blob(4096, 7);
  const ByteView view{blob.data(), blob.size()};
  char device_side[64];  // never written: recorded copies are not carried out here
  void* dst = device_side;
  // No scope: nothing is taken.
  CHECK_FALSE(WeightUploadScope::offer(dst, blob.data(), 16, cudaMemcpyHostToDevice));
  {
    WeightUploadScope scope(view, 0);
    CHECK(hooked_memcpy(dst, blob.data() + 100, 200, cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK(hooked_memcpy(dst, blob.data(), blob.size(), cudaMemcpyDefault) == cudaSuccess);  // the whole blob
    REQUIRE(scope.recorded().size() == 2);
    CHECK(scope.recorded()[0].dst == dst);
    CHECK(scope.recorded()[0].src == blob.data() + 100);
    CHECK(scope.recorded()[0].bytes == 200);
    CHECK(scope.recorded()[1].bytes == blob.size());
    // Not taken: another direction, a range that leaves the blob, memory outside it, zero bytes.
    CHECK_FALSE(WeightUploadScope::offer(dst, blob.data(), 16, cudaMemcpyDeviceToHost));
    CHECK_FALSE(WeightUploadScope::offer(dst, blob.data() + 4090, 16, cudaMemcpyHostToDevice));
    CHECK_FALSE(WeightUploadScope::offer(dst, device_side, 16, cudaMemcpyHostToDevice));
    CHECK_FALSE(WeightUploadScope::offer(dst, blob.data(), 0, cudaMemcpyHostToDevice));
    CHECK(scope.recorded().size() == 2);
  }
  // The scope is gone: copies from the blob reach libcudart again.
  CHECK_FALSE(WeightUploadScope::offer(dst, blob.data(), 16, cudaMemcpyHostToDevice));
}

TEST_CASE("weight upload: another copy inside the scope first carries out what was recorded") {
  std::vector<std::uint8_t> blob(1024, 1);
  char not_device[32];
  WeightUploadScope scope({blob.data(), blob.size()}, 0);
  REQUIRE(hooked_memcpy(not_device, blob.data(), 32, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(scope.recorded().size() == 1);
  // A device-to-host copy is not taken: the recorded copy runs before it (and
  // fails here, the destination not being device memory or no GPU being present),
  // the failure comes back from the call, and nothing stays recorded.
  CHECK(hooked_memcpy(not_device, not_device, 32, cudaMemcpyDeviceToHost) != cudaSuccess);
  (void)cudaGetLastError();
  CHECK(scope.recorded().empty());
  // Still recording afterwards.
  CHECK(hooked_memcpy(not_device, blob.data(), 8, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(scope.recorded().size() == 1);
}

TEST_CASE("weight upload: flushing a scope with nothing recorded touches no device") {
  std::vector<std::uint8_t> blob(64, 0);
  WeightUploadScope scope({blob.data(), blob.size()}, 0);
  const auto result = scope.flush();
  CHECK(result.bytes == 0);
  CHECK(result.threads == 0);
  // flush() ended the recording.
  CHECK_FALSE(WeightUploadScope::offer(blob.data(), blob.data(), 8, cudaMemcpyHostToDevice));
}

TEST_CASE("weight upload: a blob inside a mapped file can be read back through the file's descriptor") {
  // The staged upload reads a blob with pread when format::reopen_file_of finds its file.
  char name[] = "/tmp/aoti_cuda_dup_file_XXXXXX";
  const int fd = ::mkstemp(name);
  REQUIRE(fd >= 0);
  std::vector<std::uint8_t> bytes(3 * 4096 + 17);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 31 + 7);
  REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  ::close(fd);
  const int fds_before = aoti_cuda_test::count_fds();
  {
    const aoti_cuda::format::MappedFile file(name);
    std::uint64_t offset = 0;
    const int dup = aoti_cuda::format::reopen_file_of(file.data() + 5000, 100, &offset);
    REQUIRE(dup >= 0);
    CHECK(offset == 5000);
    std::vector<std::uint8_t> back(100);
    CHECK(::pread(dup, back.data(), back.size(), static_cast<off_t>(offset)) == 100);
    CHECK(std::equal(back.begin(), back.end(), bytes.begin() + 5000));
    ::close(dup);
    // The whole file is inside; one byte past its end is not; nor is memory elsewhere.
    CHECK(close_if_open(aoti_cuda::format::reopen_file_of(file.data(), file.size(), &offset)));
    CHECK_FALSE(close_if_open(aoti_cuda::format::reopen_file_of(file.data() + 1, file.size(), &offset)));
    CHECK_FALSE(close_if_open(aoti_cuda::format::reopen_file_of(bytes.data(), 16, &offset)));
    CHECK(aoti_cuda_test::count_fds() == fds_before);  // a mapping holds no descriptor
    // Another file under the same path: not the mapped bytes, so not found.
    REQUIRE(::unlink(name) == 0);
    const int other = ::open(name, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    REQUIRE(other >= 0);
    REQUIRE(::write(other, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    ::close(other);
    CHECK_FALSE(close_if_open(aoti_cuda::format::reopen_file_of(file.data(), 16, &offset)));
  }
  CHECK(aoti_cuda_test::count_fds() == fds_before);
  ::unlink(name);
}

TEST_CASE("weight upload: staging slot size follows the bytes to carry, 1 to 4 MiB") {
  using aoti_cuda::runtime::staging_slot_bytes;
  constexpr std::size_t MiB = std::size_t{1} << 20;
  CHECK(staging_slot_bytes(0, 8) == MiB);
  CHECK(staging_slot_bytes(64 * MiB, 8) == MiB);
  CHECK(staging_slot_bytes(512 * MiB, 8) == 2 * MiB);
  CHECK(staging_slot_bytes(717 * MiB, 8) == 2 * MiB);
  CHECK(staging_slot_bytes(1024 * MiB, 8) == 4 * MiB);
  CHECK(staging_slot_bytes(std::size_t{100} << 30, 8) == 4 * MiB);
  CHECK(staging_slot_bytes(1024 * MiB, 0) == 4 * MiB);  // threads < 1 counts as 1
  // Staging (2 slots per thread) stays within 1/16 of the bytes, or at the 2 MiB-per-thread minimum.
  for (std::size_t total : {100 * MiB, 300 * MiB, 2187 * MiB}) {
    CHECK((2 * 8 * staging_slot_bytes(total, 8) <= total / 16 || staging_slot_bytes(total, 8) == MiB));
  }
}

TEST_CASE("weight upload: staging blocks are each decided once, and out-of-range ones are null") {
  // Without a GPU every block is refused (nullptr); with one, each is page-locked.
  // Either way wait() returns for every block, and the destructor frees them.
  using aoti_cuda::runtime::StagingMemory;
  for (const StagingMemory memory : {StagingMemory::kHugePages, StagingMemory::kWriteCombined, StagingMemory::kHostAlloc}) {
    CAPTURE(aoti_cuda::runtime::staging_memory_name(memory));
    aoti_cuda::runtime::StagingBlocks blocks(0, 3, std::size_t{1} << 20, memory);
    const bool first = blocks.wait(0) != nullptr;
    for (int i = 1; i < 3; ++i) CHECK((blocks.wait(i) != nullptr) == first);
    CHECK(blocks.wait(3) == nullptr);
    CHECK(blocks.wait(-1) == nullptr);
    CHECK(blocks.threads() == 3);
    CHECK(blocks.slot_bytes() == (std::size_t{1} << 20));
  }
}

TEST_CASE("weight upload: a load's tuning reaches the staging; a refused block leaves nothing behind") {
  using aoti_cuda::runtime::StagingMemory;
  aoti_cuda::TuningOptions t;
  t.upload_threads = 3;
  t.staging = StagingMemory::kHostAlloc;
  const aoti_cuda::runtime::StagedUploadOptions o = aoti_cuda::runtime::upload_options(aoti_cuda::resolve_tuning(t));
  CHECK(o.threads == 3);
  CHECK(o.memory == StagingMemory::kHostAlloc);
  const auto blocks = aoti_cuda::runtime::StagingBlocks::for_blob(0, std::size_t{64} << 20, o);
  REQUIRE(blocks != nullptr);
  CHECK(blocks->threads() == 3);
  CHECK(blocks->slot_bytes() == aoti_cuda::runtime::staging_slot_bytes(std::size_t{64} << 20, 3));
  // A block either is page-locked (a GPU) or is refused with nothing held.
  auto b = aoti_cuda::runtime::StagingBlock::allocate(0, std::size_t{3} << 20, StagingMemory::kHugePages);
  if (b.ptr == nullptr) {
    CHECK(b.bytes == 0);
    CHECK(b.mapping == nullptr);
  } else {
    CHECK(b.bytes == (std::size_t{3} << 20));
    CHECK(reinterpret_cast<std::uintptr_t>(b.ptr) % (std::size_t{2} << 20) == 0);
  }
  b.release();
  CHECK(b.ptr == nullptr);
  CHECK(b.mapping == nullptr);
}
