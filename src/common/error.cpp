#include "dlm/error.h"

namespace dlm {

std::string_view toString(ErrorCode code) {
  switch (code) {
    case ErrorCode::LOCK_UNAVAILABLE:
      return "LOCK_UNAVAILABLE";
    case ErrorCode::CONNECTION_ERROR:
      return "CONNECTION_ERROR";
    case ErrorCode::RETRIES_EXHAUSTED:
      return "RETRIES_EXHAUSTED";
    case ErrorCode::TABLE_CREATION_ERROR:
      return "TABLE_CREATION_ERROR";
    case ErrorCode::INTERNAL_ERROR:
      return "INTERNAL_ERROR";
    case ErrorCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case ErrorCode::SCHEMA_MISMATCH:
      return "SCHEMA_MISMATCH";
    case ErrorCode::DEADLOCK_DETECTED:
      return "DEADLOCK_DETECTED";
    case ErrorCode::LOCK_NOT_HELD:
      return "LOCK_NOT_HELD";
    case ErrorCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
  }
  return "UNKNOWN";
}

DLMException::DLMException(ErrorCode code, const std::string& message,
                           bool transient)
    : std::runtime_error(message), code_(code), transient_(transient) {}

}  // namespace dlm
