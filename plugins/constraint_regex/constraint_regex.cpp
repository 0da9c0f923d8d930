// The regex constraint plugin: the whole output is a match of the regex (ECMAScript-style
// syntax, as JSON Schema `pattern` uses, anchored at both ends).
#include "constraints/plugin_adapter.h"

namespace {
constexpr char kKinds[] = "regex";
}  // namespace

TSR_SDK_CONSTRAINT_PLUGIN(tsr::constraints::LibraryConstraint<kKinds>, "regex", "0.1.0")
