// DLM_HIDDEN keeps a class that is nested in an exported one (a pimpl's
// Impl) out of libdlm's exported symbols: a nested class otherwise takes the
// visibility of the class around it (include/dlm/export.h).
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define DLM_HIDDEN __attribute__((visibility("hidden")))
#else
#define DLM_HIDDEN
#endif
