// The json_schema constraint plugin: JSON Schema and json_object (any JSON object) through
// the constraints library. Unsupported keywords fail compilation naming the keyword and
// where it appears in the schema.
#include "constraints/plugin_adapter.h"

namespace {
constexpr char kKinds[] = "json_schema,json_object";
}  // namespace

TSR_SDK_CONSTRAINT_PLUGIN(tsr::constraints::LibraryConstraint<kKinds>, "json_schema", "0.1.0")
