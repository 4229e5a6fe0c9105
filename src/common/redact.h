// Hiding passwords in text that may quote a connection string or URL. One
// helper for the whole library (the PostgreSQL store's errors, openStore's
// messages) and dlmctl, so that every message is redacted the same way.
#pragma once

#include <string>
#include <string_view>

namespace dlm::internal {

// `text` with passwords replaced by "***": the value of every password=
// keyword (quoted or not, also in a URI query) and the password part of
// scheme://user:password@host for any scheme (postgresql://, but also a
// mistyped or foreign one such as mysql://, which is echoed in the message
// that refuses it). For anything that may quote a connection string on its
// way into an exception message or the terminal.
std::string redactSecrets(std::string_view text);

}  // namespace dlm::internal
