#include "server/response_store.h"

#include <gtest/gtest.h>

namespace tsr::server {
namespace {

using nlohmann::json;

json conversation(const std::string& text) { return json::array({{{"role", "user"}, {"content", text}}}); }

TEST(ResponseStore, KeepsTheNewestWithinItsBounds) {
  ResponseStore store(2, 1 << 20, std::chrono::seconds(3600));
  store.put("a", conversation("1"));
  store.put("b", conversation("2"));
  store.put("c", conversation("3"));
  EXPECT_FALSE(store.get("a")) << "the oldest gave way";
  EXPECT_EQ(*store.get("b"), conversation("2"));
  EXPECT_EQ(*store.get("c"), conversation("3"));
  EXPECT_FALSE(store.get("zzz"));
}

TEST(ResponseStore, BytesAndAgeBoundIt) {
  ResponseStore small(100, 120, std::chrono::seconds(3600));
  small.put("big", conversation(std::string(200, 'x')));
  EXPECT_FALSE(small.get("big")) << "larger than the whole store: not kept";
  small.put("a", conversation(std::string(50, 'x')));
  small.put("b", conversation(std::string(50, 'y')));
  EXPECT_FALSE(small.get("a")) << "over the byte bound, the oldest went";
  EXPECT_TRUE(small.get("b"));
  ResponseStore expiring(100, 1 << 20, std::chrono::seconds(0));
  expiring.put("a", conversation("1"));
  EXPECT_FALSE(expiring.get("a"));
}

}  // namespace
}  // namespace tsr::server
