// A device that fails for good (lost_device_backend.cpp) ends the engine: the requests in
// flight and those queued fail naming the device error, submit refuses new ones, and the
// server's /health turns 500 so that an orchestrator restarts it. A step that fails while
// the device still synchronizes (a bad request) leaves the engine serving: the other
// engine tests cover that.
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/engine/engine.h"
#include "core/error.h"
#include "server/http_server.h"
#include "tests/common/shared_data.h"

namespace tsr {
namespace {

constexpr const char* kModel = "models/stories260K.gguf";

std::unique_ptr<Engine> lost_device_engine() {
  Config c;
  c.model.path = testing::shared_path(kModel);
  c.plugin_dir = LOST_DEVICE_DIR;
  c.backend.plugin = "lost_device";
  c.backend.threads = 1;
  return Engine::create(c);
}

RequestParams request(int32_t max_tokens) {
  RequestParams p;
  p.prompt = {1, 403, 407, 261};
  p.max_tokens = max_tokens;
  p.sampling.temperature = 0;
  p.ignore_eos = true;
  return p;
}

TEST(DeviceFailure, LostDeviceFailsEveryRequestAndRefusesNewOnes) {
  TSR_REQUIRE_SHARED(kModel);
  setenv("TESSERA_TEST_LOST_DEVICE_OPS", "300", 1);  // a few steps of stories260K
  auto engine = lost_device_engine();
  EXPECT_FALSE(engine->failure());
  std::vector<RequestId> ids;
  std::vector<GenerateResult> results(3);
  for (size_t i = 0; i < results.size(); ++i) {
    ids.push_back(engine->submit(request(200), [&results, i](const RequestOutput& out) {
      results[i].finish_reason = out.finish_reason;
      results[i].error = out.error;
    }));
  }
  while (engine->step()) {
  }
  for (const GenerateResult& r : results) {
    EXPECT_EQ(r.finish_reason, TSR_FINISH_ERROR);
    EXPECT_NE(r.error.find("device lost"), std::string::npos) << r.error;
  }
  ASSERT_TRUE(engine->failure());
  EXPECT_NE(engine->failure()->find("the device failed: "), std::string::npos) << *engine->failure();
  try {
    engine->submit(request(4), {});
    ADD_FAILURE() << "a failed engine took a request";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), TSR_STATUS_DEVICE_ERROR);
    EXPECT_NE(std::string(e.what()).find("serves no more requests"), std::string::npos) << e.what();
  }

  server::ServerOptions o;
  o.port = 0;
  o.model_id = "stories260K";
  server::HttpServer server(*engine, o);
  httplib::Client client("127.0.0.1", server.start());
  const auto health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 500);
  EXPECT_EQ(nlohmann::json::parse(health->body)["status"], "error");
  const auto refused = client.Post("/v1/completions", R"({"prompt": "Once", "max_tokens": 2})", "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 500);
  EXPECT_EQ(nlohmann::json::parse(refused->body)["error"]["code"], "engine_failed") << refused->body;
}

}  // namespace
}  // namespace tsr
