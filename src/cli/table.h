// Aligned text tables for dlmctl's human-readable output.
#pragma once

#include <string>
#include <vector>

namespace dlm::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> header);

  // Cells are printed as given: pass database text through printable().
  void add(std::vector<std::string> row);
  bool empty() const { return rows_.size() == 1; }

  // Every row, columns padded to their widest cell, two spaces apart.
  std::string render() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace dlm::cli
