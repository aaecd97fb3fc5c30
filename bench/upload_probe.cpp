// Where the weights upload's time goes, stage by stage, on one machine.
//
//   aoti_cuda_upload_probe [FILE_MiB=1024] [DIR=/tmp] [all|pin]
//
// Writes a FILE_MiB file (kept in the page cache), then measures, each as GB/s
// of file bytes reaching the device (or the staging memory, for host-only
// rows), best of 3:
//   pinned            cudaMemcpy from one pinned buffer, 32 MiB pieces (the bar)
//   dma-only          N streams of slot-sized async copies from pinned slots, no host work
//   memcpy-only       N threads copy mapping -> pinned slots, no device copies
//   pread-only        N threads pread file -> pinned slots, no device copies
//   staged-memcpy     the load's pipeline (host copy out of the mapping, then async copy)
//   staged-pread      the same with pread instead of the mapping
//   register-chunks   cudaHostRegister of the mapping, W MiB at a time, copy, unregister
// and, for the staging memory itself, what page-locking S MiB costs each way
// (cudaHostAlloc; anonymous pages registered; the same on transparent huge
// pages), and single cold runs of the pipeline into fresh device memory (what
// a load sees: no best-of, new streams, device pages never written before).
// It exists to choose the staging design from measurements; it prints numbers
// and has no pass/fail.
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Source {
  int fd = -1;
  const std::uint8_t* map = nullptr;
  std::size_t bytes = 0;
};

enum class Host { kNone, kMemcpy, kPread };

// Each thread takes slot-sized chunks in turn; per chunk: host work into one
// of its two slots (unless kNone), then (if dma) an async copy of the slot.
double pipeline(const Source& src, std::uint8_t* dev, std::uint8_t* pinned, int threads, std::size_t slot, Host host,
                bool dma) {
  const std::size_t chunks = (src.bytes + slot - 1) / slot;
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> pool;
  const auto t0 = Clock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      check(cudaSetDevice(0), "cudaSetDevice");
      cudaStream_t s;
      cudaEvent_t ev[2];
      check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
      for (auto& e : ev) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event");
      std::uint8_t* slots = pinned + static_cast<std::size_t>(t) * 2 * slot;
      for (std::size_t round = 0;; ++round) {
        const std::size_t c = next.fetch_add(1);
        if (c >= chunks) break;
        const int k = static_cast<int>(round & 1);
        if (round >= 2 && dma) check(cudaEventSynchronize(ev[k]), "sync");
        const std::size_t off = c * slot;
        const std::size_t n = std::min(slot, src.bytes - off);
        std::uint8_t* buf = slots + k * slot;
        if (host == Host::kMemcpy) {
          std::memcpy(buf, src.map + off, n);
        } else if (host == Host::kPread) {
          std::size_t got = 0;
          while (got < n) {
            const ssize_t r = ::pread(src.fd, buf + got, n - got, static_cast<off_t>(off + got));
            if (r <= 0) {
              std::perror("pread");
              std::exit(1);
            }
            got += static_cast<std::size_t>(r);
          }
        }
        if (dma) {
          check(cudaMemcpyAsync(dev + off, buf, n, cudaMemcpyHostToDevice, s), "copy");
          check(cudaEventRecord(ev[k], s), "record");
        }
      }
      check(cudaStreamSynchronize(s), "stream sync");
      for (auto& e : ev) cudaEventDestroy(e);
      cudaStreamDestroy(s);
    });
  }
  for (auto& th : pool) th.join();
  return static_cast<double>(src.bytes) / seconds_since(t0) / 1e9;
}

double register_chunks(const Source& src, std::uint8_t* dev, std::size_t window, int threads) {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t chunks = (src.bytes + window - 1) / window;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> pool;
  const auto t0 = Clock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      check(cudaSetDevice(0), "cudaSetDevice");
      cudaStream_t s;
      check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
      for (;;) {
        const std::size_t c = next.fetch_add(1);
        if (c >= chunks || failed) break;
        const std::size_t off = c * window;
        const std::size_t n = std::min(window, src.bytes - off);
        void* p = const_cast<std::uint8_t*>(src.map + off);
        const std::size_t len = (n + page - 1) / page * page;
        if (cudaHostRegister(p, len, cudaHostRegisterReadOnly) != cudaSuccess) {
          (void)cudaGetLastError();
          failed = true;
          break;
        }
        check(cudaMemcpyAsync(dev + off, p, n, cudaMemcpyHostToDevice, s), "copy");
        check(cudaStreamSynchronize(s), "sync");
        check(cudaHostUnregister(p), "unregister");
      }
      cudaStreamDestroy(s);
    });
  }
  for (auto& th : pool) th.join();
  if (failed) return -1;
  return static_cast<double>(src.bytes) / seconds_since(t0) / 1e9;
}

template <typename F>
double best_of(int n, F f) {
  double best = 0;
  for (int i = 0; i < n; ++i) best = std::max(best, f());
  return best;
}


double ms_since(Clock::time_point t0) { return seconds_since(t0) * 1e3; }

// Anonymous memory aligned to 2 MiB; huge: ask for transparent huge pages.
// Touches every page (the first write allocates it) so registering pins
// memory that exists. Returns nullptr on failure.
std::uint8_t* anon_pages(std::size_t bytes, bool huge) {
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  void* raw = ::mmap(nullptr, bytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  auto* p = reinterpret_cast<std::uint8_t*>((reinterpret_cast<std::uintptr_t>(raw) + kHuge - 1) / kHuge * kHuge);
  if (huge) (void)::madvise(p, bytes, 14 /* MADV_HUGEPAGE */);
  for (std::size_t at = 0; at < bytes; at += 4096) p[at] = 0;
  return p;
}

long anon_huge_kib() {
  FILE* f = std::fopen("/proc/self/smaps_rollup", "r");
  if (f == nullptr) return -1;
  char line[256];
  long kib = -1;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "AnonHugePages: %ld kB", &kib) == 1) break;
  }
  std::fclose(f);
  return kib;
}

// What page-locking `bytes` of staging costs, each way; then the device copy
// rate from each kind of memory (8 streams, 4 MiB copies, no host work).
void pin_costs(const Source& src, std::uint8_t* dev, std::size_t bytes) {
  {
    char thp[128] = "?";
    if (FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r")) {
      if (std::fgets(thp, sizeof thp, f) == nullptr) std::strcpy(thp, "?");
      std::fclose(f);
    }
    std::printf("transparent huge pages: %s", thp);
  }
  const std::size_t mib = bytes >> 20;
  for (int rep = 0; rep < 2; ++rep) {
    for (const unsigned flags : {0u, static_cast<unsigned>(cudaHostAllocWriteCombined)}) {
      void* p = nullptr;
      const auto t0 = Clock::now();
      check(cudaHostAlloc(&p, bytes, flags), "cudaHostAlloc");
      const double ms = ms_since(t0);
      const auto t1 = Clock::now();
      check(cudaFreeHost(p), "cudaFreeHost");
      std::printf("pin %4zu MiB cudaHostAlloc%-4s            %7.2f ms (%.3f ms/MiB), free %.2f ms\n", mib,
                  flags ? " wc" : "", ms, ms / mib, ms_since(t1));
    }
    for (const bool huge : {false, true}) {
      const long huge0 = anon_huge_kib();
      const auto t0 = Clock::now();
      std::uint8_t* p = anon_pages(bytes, huge);
      if (p == nullptr) {
        std::printf("pin: mmap failed\n");
        continue;
      }
      const double touch_ms = ms_since(t0);
      const long huge1 = anon_huge_kib();
      const auto t1 = Clock::now();
      const cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterDefault);
      const double reg_ms = ms_since(t1);
      double dma = 0;
      if (e == cudaSuccess) {
        const std::size_t slot = std::size_t{4} << 20;
        const int threads = static_cast<int>(std::min<std::size_t>(8, bytes / (2 * slot)));
        if (threads > 0) dma = best_of(3, [&] { return pipeline(src, dev, p, threads, slot, Host::kNone, true); });
        const auto t2 = Clock::now();
        check(cudaHostUnregister(p), "cudaHostUnregister");
        std::printf("pin %4zu MiB %-24s touch %6.2f ms + register %6.2f ms = %.3f ms/MiB (huge pages %ld MiB), "
                    "unregister %.2f ms, dma %.1f GB/s\n",
                    mib, huge ? "anon THP + register" : "anon 4K + register", touch_ms, reg_ms,
                    (touch_ms + reg_ms) / mib, (huge1 - huge0) / 1024, ms_since(t2), dma);
      } else {
        (void)cudaGetLastError();
        std::printf("pin %4zu MiB %s: cudaHostRegister failed: %s\n", mib, huge ? "THP" : "4K", cudaGetErrorString(e));
      }
      ::munmap(p, bytes);  // the alignment slack stays mapped: a probe, not a library
    }
  }
}

// Single runs of the pipeline as a load makes them: fresh device memory,
// new threads and streams, no best-of.
void cold_runs(const Source& src, std::size_t slot, int threads) {
  std::uint8_t* pinned = nullptr;
  check(cudaHostAlloc(reinterpret_cast<void**>(&pinned), static_cast<std::size_t>(threads) * 2 * slot,
                      cudaHostAllocWriteCombined),
        "alloc");
  for (int run = 0; run < 3; ++run) {
    std::uint8_t* fresh = nullptr;
    check(cudaMalloc(reinterpret_cast<void**>(&fresh), src.bytes), "cudaMalloc");
    const double cold = pipeline(src, fresh, pinned, threads, slot, Host::kPread, true);
    const double again = pipeline(src, fresh, pinned, threads, slot, Host::kPread, true);
    std::printf("cold run %d, %2d threads x %4zu KiB, pread: fresh device memory %.1f GB/s, same memory again %.1f GB/s\n",
                run, threads, slot >> 10, cold, again);
    check(cudaFree(fresh), "cudaFree");
  }
  cudaFreeHost(pinned);
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024;
  const std::string dir = argc > 2 ? argv[2] : "/tmp";
  const std::size_t bytes = mib << 20;
  const std::string path = dir + "/aoti_cuda_upload_probe.bin";
  {
    std::vector<std::uint8_t> block(std::size_t{64} << 20);
    for (std::size_t i = 0; i < block.size(); ++i) block[i] = static_cast<std::uint8_t>(i * 2654435761u >> 13);
    const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    for (std::size_t at = 0; at < bytes; at += block.size()) {
      if (::write(fd, block.data(), std::min(block.size(), bytes - at)) < 0) return 1;
    }
    ::fdatasync(fd);
    ::close(fd);
  }
  Source src;
  src.fd = ::open(path.c_str(), O_RDONLY);
  src.bytes = bytes;
  src.map = static_cast<const std::uint8_t*>(::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, src.fd, 0));
  if (src.map == MAP_FAILED) return 1;
  check(cudaSetDevice(0), "cudaSetDevice");
  check(cudaFree(nullptr), "context");
  std::uint8_t* dev = nullptr;
  check(cudaMalloc(reinterpret_cast<void**>(&dev), bytes), "cudaMalloc");

  const std::string mode = argc > 3 ? argv[3] : "all";
  if (mode == "all" || mode == "pin") {
    pin_costs(src, dev, std::size_t{64} << 20);
    pin_costs(src, dev, std::size_t{256} << 20);
    cold_runs(src, std::size_t{4} << 20, 8);
    cold_runs(src, std::size_t{4} << 20, 16);
    if (mode == "pin") return 0;
  }
  // The bar: one pinned buffer, 32 MiB synchronous pieces.
  {
    std::uint8_t* host = nullptr;
    check(cudaMallocHost(reinterpret_cast<void**>(&host), bytes), "cudaMallocHost");
    std::memcpy(host, src.map, bytes);
    const double gbs = best_of(3, [&] {
      const auto t0 = Clock::now();
      for (std::size_t at = 0; at < bytes; at += std::size_t{32} << 20) {
        check(cudaMemcpy(dev + at, host + at, std::min(std::size_t{32} << 20, bytes - at), cudaMemcpyHostToDevice),
              "pinned");
      }
      return static_cast<double>(bytes) / seconds_since(t0) / 1e9;
    });
    std::printf("pinned                                   %6.1f GB/s\n", gbs);
    cudaFreeHost(host);
  }
  std::printf("threads slot  wc  | dma-only memcpy-only pread-only | staged-memcpy staged-pread  (GB/s)\n");
  const int thread_counts[] = {2, 4, 8, 16};
  const std::size_t slots[] = {std::size_t{256} << 10, std::size_t{1} << 20, std::size_t{4} << 20};
  for (int wc = 1; wc >= 0; --wc) {
    for (const std::size_t slot : slots) {
      for (const int threads : thread_counts) {
        std::uint8_t* pinned = nullptr;
        const std::size_t need = static_cast<std::size_t>(threads) * 2 * slot;
        check(cudaHostAlloc(reinterpret_cast<void**>(&pinned), need, wc ? cudaHostAllocWriteCombined : 0), "alloc");
        const double d = best_of(3, [&] { return pipeline(src, dev, pinned, threads, slot, Host::kNone, true); });
        const double m = best_of(3, [&] { return pipeline(src, dev, pinned, threads, slot, Host::kMemcpy, false); });
        const double p = best_of(3, [&] { return pipeline(src, dev, pinned, threads, slot, Host::kPread, false); });
        const double sm = best_of(3, [&] { return pipeline(src, dev, pinned, threads, slot, Host::kMemcpy, true); });
        const double sp = best_of(3, [&] { return pipeline(src, dev, pinned, threads, slot, Host::kPread, true); });
        std::printf("%7d %4zuK %3s | %8.1f %11.1f %10.1f | %13.1f %12.1f\n", threads, slot >> 10, wc ? "on" : "off", d,
                    m, p, sm, sp);
        std::fflush(stdout);
        cudaFreeHost(pinned);
      }
    }
  }
  for (const std::size_t window : {std::size_t{16} << 20, std::size_t{64} << 20}) {
    for (const int threads : {1, 4}) {
      const double r = best_of(2, [&] { return register_chunks(src, dev, window, threads); });
      std::printf("register-chunks %3zu MiB windows, %d threads: %6.1f GB/s\n", window >> 20, threads, r);
      std::fflush(stdout);
    }
  }
  cudaFree(dev);
  ::munmap(const_cast<std::uint8_t*>(src.map), bytes);
  ::close(src.fd);
  ::unlink(path.c_str());
  return 0;
}
