#include "random_id.h"

#include <unistd.h>

#include <cstdint>
#include <random>

#include "process_id.h"

namespace dlm::internal {
namespace {

std::mt19937_64 freshGenerator() {
  std::random_device rd;
  std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
  return std::mt19937_64(seq);
}

// One generator per thread (no lock). A fork()ed child inherits its parent's
// generator state, so re-seed when the pid changed: otherwise parent and
// child would hand out the same tokens.
std::mt19937_64& threadGenerator() {
  thread_local std::mt19937_64 gen = freshGenerator();
  thread_local pid_t seededIn = currentProcessId();
  if (pid_t pid = currentProcessId(); pid != seededIn) {
    gen = freshGenerator();
    seededIn = pid;
  }
  return gen;
}

}  // namespace

double randomFraction() {
  return std::uniform_real_distribution<double>(0.0, 1.0)(threadGenerator());
}

std::string randomUuid() {
  std::mt19937_64& gen = threadGenerator();
  std::uint64_t hi = gen();
  std::uint64_t lo = gen();
  hi = (hi & 0xFFFFFFFFFFFF0FFFULL) | 0x0000000000004000ULL;  // version 4
  lo = (lo & 0x3FFFFFFFFFFFFFFFULL) | 0x8000000000000000ULL;  // variant 10
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  auto put = [&](std::uint64_t v, int firstShift, int nibbles) {
    for (int i = 0; i < nibbles; ++i) {
      out.push_back(kHex[(v >> (firstShift - 4 * i)) & 0xF]);
    }
  };
  put(hi, 60, 8);
  out.push_back('-');
  put(hi, 28, 4);
  out.push_back('-');
  put(hi, 12, 4);
  out.push_back('-');
  put(lo, 60, 4);
  out.push_back('-');
  put(lo, 44, 12);
  return out;
}

}  // namespace dlm::internal
