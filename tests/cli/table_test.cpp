// dlmctl's text tables: a huge value is cut, so one row cannot flood the
// terminal or make every row padded to its width.
#include "table.h"

#include <gtest/gtest.h>

#include <string>

namespace dlm::cli {
namespace {

TEST(Table, AHugeCellIsCutAndTheOtherRowsAreNotPaddedToIt) {
  Table table({"KEY", "HOST", "PID"});
  table.add({"DC#f#c#a", std::string(32 * 1024 * 1024, 'h'), "1"});
  table.add({"DC#f#c#b", "web-1", "2"});
  const std::string out = table.render();
  EXPECT_LT(out.size(), 4 * Table::kMaxCellBytes);
  const std::string cut = std::string(Table::kMaxCellBytes - 3, 'h') + "...";
  EXPECT_NE(out.find(cut + "  1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("web-1"), std::string::npos);
}

TEST(Table, ACellIsCutBetweenUtf8Characters) {
  Table table({"OWNER"});
  std::string wide;
  while (wide.size() < 2 * Table::kMaxCellBytes) wide += "\xc3\xa9";  // é
  table.add({wide});
  const std::string out = table.render();
  const std::string shown = out.substr(out.find('\n') + 1);
  // Whole characters only, then the ellipsis.
  ASSERT_GE(shown.size(), 4U);
  EXPECT_EQ(shown.substr(shown.size() - 4), "...\n");
  const std::string kept = shown.substr(0, shown.size() - 4);
  EXPECT_EQ(kept.size() % 2, 0U) << "no half of a two-byte character";
  EXPECT_LE(kept.size() + 3, Table::kMaxCellBytes);
}

TEST(Table, ShortCellsAreShownWhole) {
  Table table({"A", "B"});
  table.add({"x", std::string(Table::kMaxCellBytes, 'y')});
  EXPECT_EQ(table.render(), "A  B\nx  " + std::string(Table::kMaxCellBytes, 'y') +
                                "\n");
}

}  // namespace
}  // namespace dlm::cli
