#include "suggest.h"

#include <algorithm>

namespace dlm::cli {
namespace {

// Optimal string alignment distance (Damerau-Levenshtein without
// overlapping edits): the classic DP over prefixes.
std::size_t editDistance(const std::string& a, const std::string& b) {
  const std::size_t n = a.size();
  const std::size_t m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1,
                                          std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] =
          std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

}  // namespace

std::optional<std::string> closestName(const std::string& word,
                                       const std::vector<std::string>& names) {
  // Option names are compared without their dashes' share of the length.
  const std::size_t core =
      word.size() - std::min(word.find_first_not_of('-'), word.size());
  // A one-letter option ("-z") is near every other one: no guess.
  if (core <= 1) return std::nullopt;
  const std::size_t allowed = core <= 4 ? 1 : 2;
  std::optional<std::string> best;
  std::size_t bestDistance = allowed + 1;
  for (const std::string& name : names) {
    const std::size_t distance = editDistance(word, name);
    if (distance < bestDistance) {
      best = name;
      bestDistance = distance;
    }
  }
  return best;
}

}  // namespace dlm::cli
