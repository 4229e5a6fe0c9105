#include "common/random_id.h"

#include <fmt/format.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <random>

#include "common/process_id.h"
#include "dlm/error.h"

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

namespace {

// Fills `out` from getrandom(2): the kernel's CSPRNG, never blocking once
// it was seeded at boot.
void secureRandom(unsigned char* out, std::size_t size) {
  std::size_t filled = 0;
  while (filled < size) {
    const ssize_t n = getrandom(out + filled, size - filled, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw DLMException(ErrorCode::INTERNAL_ERROR,
                         fmt::format("no secure random source (getrandom: {})",
                                     std::strerror(errno)));
    }
    filled += static_cast<std::size_t>(n);
  }
}

// Takes `size` bytes (at most kRandomChunk) from a per-thread chunk read
// from secureRandom kRandomChunk bytes at a time: one system call per 32
// GUIDs rather than one each. No byte is handed out twice, and taken bytes
// are wiped from the chunk. A fork()ed child drops the chunk it inherited:
// otherwise parent and child would hand out the same tokens.
constexpr std::size_t kRandomChunk = 512;

void takeSecureRandom(unsigned char* out, std::size_t size) {
  struct Chunk {
    unsigned char bytes[kRandomChunk];
    std::size_t used = kRandomChunk;
    pid_t filledIn = 0;
  };
  thread_local Chunk chunk;
  if (const pid_t pid = currentProcessId(); pid != chunk.filledIn) {
    chunk.used = kRandomChunk;
    chunk.filledIn = pid;
  }
  if (size > kRandomChunk - chunk.used) {
    secureRandom(chunk.bytes, kRandomChunk);
    chunk.used = 0;
  }
  std::memcpy(out, chunk.bytes + chunk.used, size);
  explicit_bzero(chunk.bytes + chunk.used, size);
  chunk.used += size;
}

}  // namespace

std::string randomGuid() {
  unsigned char bytes[16];
  takeSecureRandom(bytes, sizeof bytes);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  for (std::size_t i = 0; i < sizeof bytes; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    out.push_back(kHex[bytes[i] >> 4]);
    out.push_back(kHex[bytes[i] & 0xF]);
  }
  return out;
}

}  // namespace dlm::internal
