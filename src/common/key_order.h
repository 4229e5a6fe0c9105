// The order in which a batch's locks are taken: key order, the same for
// every writer, so that no two batches wait for each other's rows.
#pragma once

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <string_view>
#include <vector>

namespace dlm::internal {

// The indices 0..size-1 of a batch's requests in the order of their keys
// (keyOf(i): request i's key); requests of one key keep their order.
template <typename KeyOf>
std::vector<std::size_t> indicesInKeyOrder(std::size_t size, KeyOf keyOf) {
  std::vector<std::size_t> order(size);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(
      order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return std::string_view(keyOf(a)) < std::string_view(keyOf(b));
      });
  return order;
}

}  // namespace dlm::internal
