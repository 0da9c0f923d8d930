#include "core/config/did_you_mean.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <string>
#include <vector>

namespace tsr {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Optimal string alignment distance (Damerau-Levenshtein without repeated edits of one
// substring): a transposition ("hots" -> "host") costs 1, the commonest typo after a
// missing or extra letter.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string_view closest_name(std::string_view word, std::span<const std::string_view> candidates) {
  const std::string w = lower(word);
  const size_t limit = std::max<size_t>(1, w.size() / 3);
  std::string_view best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  for (std::string_view c : candidates) {
    const std::string lc = lower(c);
    const size_t dist = edit_distance(w, lc);
    const bool prefix = !w.empty() && (lc.starts_with(w) || w.starts_with(lc));
    if (dist > limit && !prefix) continue;
    if (dist < best_distance) best = c, best_distance = dist;
  }
  return best;
}

}  // namespace tsr
