#include "keys/owner_id.h"

#include <fmt/format.h>
#include <unistd.h>

#include <optional>

#include "dlm/error.h"
#include "dlm/owner.h"
#include "common/process_id.h"
#include "common/random_id.h"
#include "keys/validation.h"

namespace dlm {
namespace internal {
namespace {

constexpr std::size_t kMaxOwnerBytes = 128;

// Set by OwnerScope; wins over the drawn GUID.
thread_local std::optional<std::string> scopedOwner;

}  // namespace

const std::string& currentThreadOwner() {
  if (scopedOwner) return *scopedOwner;
  thread_local std::string owner = randomGuid();
  thread_local pid_t drawnIn = currentProcessId();
  if (pid_t pid = currentProcessId(); pid != drawnIn) {
    owner = randomGuid();
    drawnIn = pid;
  }
  return owner;
}

}  // namespace internal

std::string currentOwner() { return internal::currentThreadOwner(); }

OwnerScope::OwnerScope(std::string owner) {
  if (owner.empty() || owner.size() > internal::kMaxOwnerBytes ||
      owner.find('\0') != std::string::npos || !internal::isValidUtf8(owner)) {
    throw DLMException(
        ErrorCode::INVALID_ARGUMENT,
        fmt::format("an owner must be 1 to {} bytes of UTF-8 without NUL",
                    internal::kMaxOwnerBytes));
  }
  if (internal::scopedOwner) {
    previous_ = std::move(*internal::scopedOwner);
    hadPrevious_ = true;
  }
  internal::scopedOwner = std::move(owner);
}

OwnerScope::~OwnerScope() {
  if (hadPrevious_) {
    internal::scopedOwner = std::move(previous_);
  } else {
    internal::scopedOwner.reset();
  }
}

}  // namespace dlm
