// aoti_cuda shim — device counters that are zero between calls, for kernels whose last block
// finishes the work of the others (decode attention merges its chunks that way: one launch
// instead of two).
//
// The contract: every kernel that takes counters from here leaves each counter it touched at zero
// when it completes (the block that sees the final count resets it). So no call needs a memset
// before it, and a CUDA graph that captured the pointer replays without one.
//
// One set per (device, stream), allocated and zeroed on first use and kept for the process (the
// pointer may be baked into a captured graph, so it is never freed). Calls on one stream run one
// after the other, so they never share counters concurrently. What this relies on beyond that: a
// graph captured on stream S keeps S's counters, so it must not run concurrently with other work
// that uses S's counters (the runtime captures on a call slot's own stream, and a slot's calls
// are ordered: graph_cache.cpp).
//
// Inside a capture (thread-local mode) the allocation switches the thread to relaxed capture mode
// for cudaMalloc and zeroes the block on a private stream, so the graph records nothing of it.
//
// Thread-safety: counters() may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace aoti_cuda {
namespace shim {
namespace zeroed_counters {

/// Counters per (device, stream).
constexpr std::size_t kPerStream = 4096;

/// At most this many streams get counters; later ones get none (their callers take the path that
/// needs none).
constexpr std::size_t kMaxStreams = 256;

/// `count` zeroed 32-bit device counters for work enqueued on `stream` of `device` (the current
/// device), or nullptr when count exceeds kPerStream, the stream table is full or the allocation
/// failed (no CUDA error is left pending then).
unsigned int* counters(int device, void* stream, std::size_t count) noexcept;

}  // namespace zeroed_counters
}  // namespace shim
}  // namespace aoti_cuda
