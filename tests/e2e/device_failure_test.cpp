// A device that fails for good (lost_device_backend.cpp) ends the engine: the requests in
// flight and those queued fail naming the device error, submit refuses new ones, and the
// server's /health turns 500 so that an orchestrator restarts it. A device error after
// which the device still synchronizes fails only the step's requests.
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/engine/engine.h"
#include "base/error.h"
#include "server/http_server.h"
#include "tests/common/shared_data.h"

namespace tsr {
namespace {

constexpr const char* kModel = "models/stories260K.gguf";

// One request runs at a time, so that the others wait in the queue when the device fails.
std::unique_ptr<Engine> lost_device_engine(bool transient) {
  setenv("TESSERA_TEST_LOST_DEVICE_OPS", "300", 1);  // a few steps of stories260K
  setenv("TESSERA_TEST_LOST_DEVICE_TRANSIENT", transient ? "1" : "0", 1);
  Config c;
  c.model.path = testing::shared_path(kModel);
  c.plugin_dir = LOST_DEVICE_DIR;
  c.backend.plugin = "lost_device";
  c.backend.threads = 1;
  c.scheduler.max_seqs = 1;
  return Engine::create(c);
}

// Submits n requests and steps until all have finished; their results.
std::vector<GenerateResult> run(Engine& engine, size_t n, int32_t max_tokens);

RequestParams request(int32_t max_tokens) {
  RequestParams p;
  p.prompt = {1, 403, 407, 261};
  p.max_tokens = max_tokens;
  p.sampling.temperature = 0;
  p.ignore_eos = true;
  return p;
}

std::vector<GenerateResult> run(Engine& engine, size_t n, int32_t max_tokens) {
  std::vector<GenerateResult> results(n);
  for (size_t i = 0; i < n; ++i) {
    engine.submit(request(max_tokens), [&results, i](const RequestOutput& out) {
      results[i].finish_reason = out.finish_reason;
      results[i].error = out.error;
    });
  }
  while (engine.step()) {
  }
  return results;
}

TEST(DeviceFailure, LostDeviceFailsEveryRequestAndRefusesNewOnes) {
  TSR_REQUIRE_SHARED(kModel);
  auto engine = lost_device_engine(false);
  EXPECT_FALSE(engine->failure());
  const std::vector<GenerateResult> results = run(*engine, 3, 200);
  // The running request fails in the step; the two queued ones when the engine fails.
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i].finish_reason, TSR_FINISH_ERROR) << i;
    EXPECT_NE(results[i].error.find("device lost"), std::string::npos) << results[i].error;
    if (i > 0) {
      EXPECT_NE(results[i].error.find("the device failed: "), std::string::npos) << results[i].error;
    }
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

// The step's request fails; the device synchronizes, so the engine serves on.
TEST(DeviceFailure, TransientDeviceErrorFailsOnlyItsStep) {
  TSR_REQUIRE_SHARED(kModel);
  auto engine = lost_device_engine(true);
  const std::vector<GenerateResult> results = run(*engine, 2, 200);
  EXPECT_EQ(results[0].finish_reason, TSR_FINISH_ERROR);
  EXPECT_NE(results[0].error.find("device fault"), std::string::npos) << results[0].error;
  EXPECT_EQ(results[1].finish_reason, TSR_FINISH_LENGTH) << results[1].error;
  EXPECT_FALSE(engine->failure());
  EXPECT_EQ(engine->generate(request(4)).finish_reason, TSR_FINISH_LENGTH);
}

}  // namespace
}  // namespace tsr
