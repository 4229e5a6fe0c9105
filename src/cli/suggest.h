// "Did you mean ...?" for misspelt command and option names.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace dlm::cli {

// The candidate closest to `word` by edit distance (insertions, deletions,
// substitutions and swaps of neighbours), if one is close enough to be a
// likely typo: at most 1 edit for words of up to 4 characters, 2 beyond.
// The first such candidate on a tie.
std::optional<std::string> closestName(const std::string& word,
                                       const std::vector<std::string>& names);

}  // namespace dlm::cli
