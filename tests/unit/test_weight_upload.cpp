// The weights upload path that needs no GPU to check: how recorded copies are
// cut into staging chunks, and which cudaMemcpy calls the exported hook takes
// while a WeightUploadScope is active (src/runtime/weight_upload.hpp).
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "runtime/weight_upload.hpp"

using aoti_cuda::ByteView;
using aoti_cuda::runtime::ChunkPiece;
using aoti_cuda::runtime::plan_chunks;
using aoti_cuda::runtime::RecordedCopy;
using aoti_cuda::runtime::WeightUploadScope;

namespace {

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

TEST_CASE("weight upload: the cudaMemcpy hook records host-to-device copies from the blob only while a scope is active") {
  std::vector<std::uint8_t> blob(4096, 7);
  const ByteView view{blob.data(), blob.size()};
  char device_side[64];  // never written: recorded copies are not carried out here
  void* dst = device_side;
  // No scope: nothing is taken.
  CHECK_FALSE(WeightUploadScope::offer(dst, blob.data(), 16, cudaMemcpyHostToDevice));
  {
    WeightUploadScope scope(view, 0);
    CHECK(cudaMemcpy(dst, blob.data() + 100, 200, cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK(cudaMemcpy(dst, blob.data(), blob.size(), cudaMemcpyDefault) == cudaSuccess);  // the whole blob
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
  REQUIRE(cudaMemcpy(not_device, blob.data(), 32, cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(scope.recorded().size() == 1);
  // A device-to-host copy is not taken: the recorded copy runs before it (and
  // fails here, the destination not being device memory or no GPU being present),
  // the failure comes back from the call, and nothing stays recorded.
  CHECK(cudaMemcpy(not_device, not_device, 32, cudaMemcpyDeviceToHost) != cudaSuccess);
  (void)cudaGetLastError();
  CHECK(scope.recorded().empty());
  // Still recording afterwards.
  CHECK(cudaMemcpy(not_device, blob.data(), 8, cudaMemcpyHostToDevice) == cudaSuccess);
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
