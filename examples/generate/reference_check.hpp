// Teacher-forced misses against eager PyTorch, told apart (generate --expect-top), planned without a GPU so that it
// is unit-tested (tests/generate).
//
// Why: the benchmark model's random weights make near ties between the two highest logits common, and any kernel
// that rounds differently from eager's (a different summation order, a fused RMSNorm) can pick the other token there.
// A miss is therefore only evidence of an error when eager itself preferred its token clearly. The exporter records
// eager's highest logits at each reference step (export_llm.py, manifest "reference"."top"); a miss whose token is
// among them gets eager's margin, logit(expected) - logit(got), and is a near tie when that margin is at most two
// bf16 steps at the expected logit's magnitude: 2^-6 * max(1, |logit(expected)|) (bf16 keeps 8 significant bits, and
// the programs return bf16 logits). A miss whose token is not among them has no known margin and is never a tie.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace reference_check {

/// One of eager's highest logits at a step.
struct Candidate {
  int64_t id = 0;
  float logit = 0;
};

/// Eager's candidates at every step from --expect-top text: steps separated by ';', candidates by ',', each
/// "id:logit" (what tools/contrib/gpu-machine/device-llm.sh writes from the manifest). Throws
/// std::invalid_argument naming the step and the piece that does not parse.
inline std::vector<std::vector<Candidate>> parse_top(const std::string& text) {
  if (text.empty() || text.back() == ';' || text.back() == ',') {
    throw std::invalid_argument("--expect-top: '" + text + "' is empty or ends with a separator");
  }
  std::vector<std::vector<Candidate>> steps;
  std::stringstream all(text);
  for (std::string step; std::getline(all, step, ';');) {
    std::vector<Candidate> candidates;
    std::stringstream one(step);
    for (std::string piece; std::getline(one, piece, ',');) {
      const std::size_t colon = piece.find(':');
      Candidate c;
      std::size_t used_id = 0, used_logit = 0;
      try {
        if (colon == std::string::npos) throw std::invalid_argument("no ':'");
        c.id = std::stoll(piece.substr(0, colon), &used_id);
        c.logit = std::stof(piece.substr(colon + 1), &used_logit);
      } catch (const std::exception&) {
        used_id = used_logit = 0;
      }
      if (used_id == 0 || used_id != colon || used_logit == 0 || colon + 1 + used_logit != piece.size() ||
          !std::isfinite(c.logit)) {
        throw std::invalid_argument("--expect-top: step " + std::to_string(steps.size()) + ": '" + piece +
                                    "' is not id:logit");
      }
      candidates.push_back(c);
    }
    if (candidates.empty()) {
      throw std::invalid_argument("--expect-top: step " + std::to_string(steps.size()) + " lists no candidate");
    }
    steps.push_back(std::move(candidates));
  }
  return steps;
}

/// One teacher-forced miss, told apart.
struct Miss {
  std::size_t step = 0;
  int64_t expected = 0, got = 0;
  bool known = false;     ///< both ids are among eager's candidates at the step: margin is eager's own
  float margin = 0;       ///< logit(expected) - logit(got), in eager's logits (known only)
  bool near_tie = false;  ///< known and margin <= 2^-6 * max(1, |logit(expected)|)
};

/// The miss at `step` (`got` instead of `expected`) against eager's candidates there.
inline Miss classify(std::size_t step, int64_t expected, int64_t got, const std::vector<Candidate>& candidates) {
  Miss m;
  m.step = step;
  m.expected = expected;
  m.got = got;
  auto find = [&](int64_t id) {
    return std::find_if(candidates.begin(), candidates.end(), [id](const Candidate& c) { return c.id == id; });
  };
  const auto want = find(expected), have = find(got);
  if (want == candidates.end() || have == candidates.end()) return m;
  m.known = true;
  m.margin = want->logit - have->logit;
  m.near_tie = m.margin <= std::ldexp(1.0f, -6) * std::max(1.0f, std::fabs(want->logit));
  return m;
}

}  // namespace reference_check
