#include "table.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

namespace dlm::cli {

Table::Table(std::vector<std::string> header) {
  rows_.push_back(std::move(header));
}

namespace {

// `cell` cut to Table::kMaxCellBytes, ending in "..." when cut.
void clip(std::string& cell) {
  if (cell.size() <= Table::kMaxCellBytes) return;
  constexpr std::string_view kEllipsis = "...";
  std::size_t keep = Table::kMaxCellBytes - kEllipsis.size();
  // Not inside a UTF-8 sequence: back up over continuation bytes.
  while (keep > 0 &&
         (static_cast<unsigned char>(cell[keep]) & 0xC0) == 0x80) {
    --keep;
  }
  cell.resize(keep);
  cell.shrink_to_fit();
  cell += kEllipsis;
}

}  // namespace

void Table::add(std::vector<std::string> row) {
  row.resize(rows_.front().size());
  for (std::string& cell : row) clip(cell);
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
