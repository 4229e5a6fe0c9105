// DLM_API marks what libdlm exports: the public classes and functions of
// these headers. The library is compiled with hidden visibility, so
// anything else (the code under src/) is not part of its ABI.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define DLM_API __attribute__((visibility("default")))
#else
#define DLM_API
#endif
