#include "table.h"

#include <fmt/format.h>

#include <algorithm>

namespace dlm::cli {

Table::Table(std::vector<std::string> header) {
  rows_.push_back(std::move(header));
}

void Table::add(std::vector<std::string> row) {
  row.resize(rows_.front().size());
  rows_.push_back(std::move(row));
}

std::string Table::render() const {
  std::vector<std::size_t> width(rows_.front().size());
  for (const auto& row : rows_) {
    for (std::size_t c = 0; c < row.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  }
  std::string out;
  for (const auto& row : rows_) {
    for (std::size_t c = 0; c < row.size(); ++c) {
      out += c + 1 == row.size() ? row[c]
                                 : fmt::format("{:<{}}  ", row[c], width[c]);
    }
    out += '\n';
  }
  return out;
}

}  // namespace dlm::cli
