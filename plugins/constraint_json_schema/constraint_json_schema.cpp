// The json_schema constraint plugin: JSON Schema, json_object (any JSON object) and
// tool_call (function calls whose arguments follow their schemas) through the constraints
// library. Unsupported keywords fail compilation naming the keyword and
// where it appears in the schema.
#include "constraints/plugin_adapter.h"

namespace {
constexpr char kKinds[] = "json_schema,json_object,tool_call";
}  // namespace

TSR_SDK_CONSTRAINT_PLUGIN(tsr::constraints::LibraryConstraint<kKinds>, "json_schema", "0.1.0")
