// The gbnf constraint plugin: llama.cpp's GBNF grammar format, starting at rule `root`.
#include "constraints/plugin_adapter.h"

namespace {
constexpr char kKinds[] = "gbnf";
}  // namespace

TSR_SDK_CONSTRAINT_PLUGIN(tsr::constraints::LibraryConstraint<kKinds>, "gbnf", "0.1.0")
