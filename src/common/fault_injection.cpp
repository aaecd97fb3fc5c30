#include "common/fault_injection.hpp"

namespace aoti_cuda::testing {
namespace {

std::atomic<std::uint32_t> g_kinds{0};
std::atomic<std::uint64_t> g_target{0};
std::atomic<std::uint64_t> g_events{0};
std::atomic<bool> g_fired{false};
std::atomic<std::uint32_t> g_fired_kind{0};

}  // namespace

std::atomic<bool> FaultInjector::armed_{false};

void FaultInjector::arm(std::uint32_t kinds, std::uint64_t n) noexcept {
  armed_.store(false, std::memory_order_seq_cst);
  g_kinds.store(kinds);
  g_target.store(n);
  g_events.store(0);
  g_fired.store(false);
  armed_.store(true, std::memory_order_seq_cst);
}

void FaultInjector::disarm() noexcept { armed_.store(false, std::memory_order_seq_cst); }

std::uint64_t FaultInjector::events() noexcept { return g_events.load(); }

bool FaultInjector::fired() noexcept { return g_fired.load(); }

FaultKind FaultInjector::fired_kind() noexcept { return static_cast<FaultKind>(g_fired_kind.load()); }

bool FaultInjector::hit(FaultKind kind) noexcept {
  if ((g_kinds.load() & static_cast<std::uint32_t>(kind)) == 0) return false;
  const std::uint64_t seen = g_events.fetch_add(1) + 1;
  if (seen != g_target.load()) return false;
  g_fired_kind.store(static_cast<std::uint32_t>(kind));
  g_fired.store(true);
  return true;
}

}  // namespace aoti_cuda::testing
