// Aligned text tables for dlmctl's human-readable output.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace dlm::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> header);

  // The most bytes of a cell that a table shows: a longer cell is cut
  // (at a UTF-8 character boundary) and ends in "...", so that one huge
  // value (a 32 MB holder host) neither floods the terminal nor makes every
  // row padded to its width. dlmctl's JSON output keeps values whole.
  static constexpr std::size_t kMaxCellBytes = 256;

  // Cells are printed as given, cut to kMaxCellBytes: pass database text
  // through printable().
  void add(std::vector<std::string> row);
  bool empty() const { return rows_.size() == 1; }

  // Every row, columns padded to their widest cell, two spaces apart.
  std::string render() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace dlm::cli
