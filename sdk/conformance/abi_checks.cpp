// Checks every plugin passes, whatever its kind: the descriptor as the host reads it.
#include <gtest/gtest.h>

#include <cstring>

#include "conformance.h"

namespace tsr::conformance {
namespace {

TEST(Abi, DescriptorIsStableAcrossQueries) {
  // The descriptor is static data: querying again (as a host of the plugin's own version)
  // returns the same object.
  const tsr_plugin_desc* d = plugin().desc;
  const tsr_plugin_desc* again = plugin().query(host_api(), d->abi_major, d->abi_minor);
  EXPECT_EQ(again, plugin().desc);
}

TEST(Abi, NameAndVersionAreSet) {
  EXPECT_GT(std::strlen(plugin().desc->name), 0u);
  EXPECT_GT(std::strlen(plugin().desc->version), 0u);
}

TEST(Abi, DeclinesAnotherMajor) {
  // A plugin returns NULL (after logging why) rather than serve a host it cannot.
  EXPECT_EQ(plugin().query(host_api(), plugin().desc->abi_major + 1, 0), nullptr);
}

}  // namespace
}  // namespace tsr::conformance
