// Decoding at chosen cache positions (generate --decode-at), planned without a GPU so that it is unit-tested
// (tests/generate): how decode's cost grows with the position it runs at (issue 32, item 4).
//
// A prompt of L tokens leaves the next decode position at L (prefill wrote positions 0..L-1). For each asked
// position P (ascending), the steps from the current position to P-1 run untimed: they fill the KV cache with
// the model's own greedy continuation, so the timed steps attend over real entries, as in a long generation.
// Then `window` steps run timed at positions P..P+window-1. Decode step i always runs at position L + i, so one
// device array of generated ids serves every step (step i reads ids[i] and writes ids[i + 1]).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace decode_plan {

struct DecodeWindow {
  int64_t fill_from = 0;  // first untimed position (== start when nothing needs filling)
  int64_t start = 0;      // first timed position
  int64_t steps = 0;      // timed steps: positions start .. start + steps - 1
};

// The windows for `positions` after a prompt of `prompt_len` tokens. max_ctx > 0: the program's cache length
// (the last timed position must be below it: a position past the cache indexes outside it on the GPU).
// Throws std::invalid_argument with the reason for anything that cannot be run as asked.
inline std::vector<DecodeWindow> plan_decode_windows(int64_t prompt_len, const std::vector<int64_t>& positions,
                                                     int64_t window, int64_t max_ctx) {
  if (prompt_len < 1) throw std::invalid_argument("--decode-at needs a prompt of at least one token");
  if (window < 1) throw std::invalid_argument("--decode-window must be at least 1");
  if (positions.empty()) throw std::invalid_argument("--decode-at lists no position");
  std::vector<DecodeWindow> out;
  int64_t next = prompt_len;  // the first position no decode step has run at yet
  for (const int64_t p : positions) {
    if (p < next) {
      throw std::invalid_argument(
          "--decode-at " + std::to_string(p) + ": positions must be ascending, at least the prompt length (" +
          std::to_string(prompt_len) + ") and at least --decode-window apart; the next free position is " +
          std::to_string(next));
    }
    if (max_ctx > 0 && p + window > max_ctx) {
      throw std::invalid_argument("--decode-at " + std::to_string(p) + " with --decode-window " +
                                  std::to_string(window) + " runs past the cache (--max-ctx " +
                                  std::to_string(max_ctx) + ")");
    }
    out.push_back({next, p, window});
    next = p + window;
  }
  return out;
}

// Decode steps the plan runs in all (untimed + timed): the size of the ids array is this + 1.
inline int64_t planned_steps(int64_t prompt_len, const std::vector<DecodeWindow>& plan) {
  return plan.empty() ? 0 : plan.back().start + plan.back().steps - prompt_len;
}

}  // namespace decode_plan
