#include "dlm/lock_events.h"

#include <fmt/format.h>

#include <ctime>
#include <mutex>
#include <ostream>

namespace dlm {
namespace {

// 2026-11-24T21:30:00.123Z
std::string utcTimestamp(std::chrono::system_clock::time_point at) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      at.time_since_epoch())
                      .count();
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                     tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
}

// A value as it goes after "key=": bare when it is plain, else quoted.
std::string value(const std::string& v) {
  bool plain = !v.empty();
  for (const char c : v) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= ' ' || c == '"' || c == '\\' || c == '=' || u == 0x7f) {
      plain = false;
    }
  }
  if (plain) return v;
  std::string out = "\"";
  for (const char c : v) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < ' ' || c == 0x7f) {
          out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

const char* modeName(LockMode mode) {
  return mode == LockMode::SHARED ? "SHARED" : "EXCLUSIVE";
}

class StreamHandler final : public LockEventHandler {
 public:
  explicit StreamHandler(std::ostream& out) : out_(out) {}
  void onEvent(const LockEvent& event) override {
    const std::string line = formatEvent(event) + "\n";
    const std::lock_guard<std::mutex> lock(mutex_);
    out_ << line << std::flush;
  }

 private:
  std::mutex mutex_;
  std::ostream& out_;
};

class LineHandler final : public LockEventHandler {
 public:
  explicit LineHandler(std::function<void(int, const std::string&)> sink)
      : sink_(std::move(sink)) {}
  void onEvent(const LockEvent& event) override {
    sink_(severityOf(event), formatEvent(event));
  }

 private:
  std::function<void(int, const std::string&)> sink_;
};

}  // namespace

std::string_view toString(LockEventKind kind) {
  switch (kind) {
    case LockEventKind::ACQUIRED:
      return "ACQUIRED";
    case LockEventKind::WAITING:
      return "WAITING";
    case LockEventKind::RELEASED:
      return "RELEASED";
    case LockEventKind::LEASE_RENEWED:
      return "LEASE_RENEWED";
    case LockEventKind::LEASE_LOST:
      return "LEASE_LOST";
    case LockEventKind::DEADLOCK:
      return "DEADLOCK";
    case LockEventKind::STORE_ERROR:
      return "STORE_ERROR";
    case LockEventKind::STORE_RECONNECTED:
      return "STORE_RECONNECTED";
    case LockEventKind::RELEASE_FAILED:
      return "RELEASE_FAILED";
    case LockEventKind::STORE_WARNING:
      return "STORE_WARNING";
  }
  return "UNKNOWN";
}

int severityOf(const LockEvent& event) {
  switch (event.kind) {
    case LockEventKind::LEASE_LOST:
    case LockEventKind::DEADLOCK:
    case LockEventKind::STORE_ERROR:
    case LockEventKind::RELEASE_FAILED:
    case LockEventKind::STORE_WARNING:
      return 4;  // LOG_WARNING
    default:
      return 6;  // LOG_INFO
  }
}

std::string formatEvent(const LockEvent& e) {
  std::string line = fmt::format("{} dlm {} client={}", utcTimestamp(e.at),
                                 toString(e.kind), value(e.clientId));
  auto add = [&line](const char* key, const std::string& v) {
    line += fmt::format(" {}={}", key, value(v));
  };
  if (!e.key.empty()) {
    add("lock", e.key);
    add("mode", modeName(e.mode));
  }
  switch (e.kind) {
    case LockEventKind::ACQUIRED:
      add("fencing", std::to_string(e.fencingToken));
      add("waited_ms", std::to_string(e.waited.count()));
      add("attempts", std::to_string(e.attempts));
      break;
    case LockEventKind::WAITING:
      add("waited_ms", std::to_string(e.waited.count()));
      add("attempts", std::to_string(e.attempts));
      if (e.blocker) {
        add(e.blocker->queued ? "queued_behind" : "blocked_by", e.blocker->key);
        if (!e.blocker->owner.empty()) {
          add("holder_owner", e.blocker->owner);
          add("holder_host", e.blocker->host);
          add("holder_pid", std::to_string(e.blocker->pid));
          add("holder_mode", modeName(e.blocker->mode));
        }
        if (e.blocker->since)
          add("held_since", utcTimestamp(*e.blocker->since));
      }
      break;
    case LockEventKind::RELEASED:
    case LockEventKind::LEASE_LOST:
      add("fencing", std::to_string(e.fencingToken));
      add("held_ms", std::to_string(e.heldFor.count()));
      break;
    case LockEventKind::LEASE_RENEWED:
      add("fencing", std::to_string(e.fencingToken));
      break;
    case LockEventKind::DEADLOCK: {
      std::string cycle;
      for (const auto& key : e.cycle) {
        if (!cycle.empty()) cycle += " -> ";
        cycle += key;
      }
      add("cycle", cycle);
      break;
    }
    case LockEventKind::RELEASE_FAILED:
      add("fencing", std::to_string(e.fencingToken));
      add("code", std::string(toString(e.code)));
      add("message", e.message);
      break;
    case LockEventKind::STORE_ERROR:
    case LockEventKind::STORE_RECONNECTED:
      add("code", std::string(toString(e.code)));
      add("message", e.message);
      break;
    case LockEventKind::STORE_WARNING:
      add("message", e.message);
      break;
  }
  return line;
}

std::shared_ptr<LockEventHandler> makeStreamEventHandler(std::ostream& out) {
  return std::make_shared<StreamHandler>(out);
}

std::shared_ptr<LockEventHandler> makeLineEventHandler(
    std::function<void(int severity, const std::string& line)> sink) {
  return std::make_shared<LineHandler>(std::move(sink));
}

}  // namespace dlm
