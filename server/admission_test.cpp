// The bounded queue counts requests and their prompt tokens; an idle server admits any call.
#include "server/admission.h"

#include <gtest/gtest.h>

namespace tsr::server {
namespace {

using Verdict = Admission::Verdict;

TEST(Admission, CountsRequestsAndPromptTokens) {
  Admission a(/*max_queue=*/4, /*max_queue_tokens=*/100);
  EXPECT_EQ(a.try_admit(10, 5000, 0), Verdict::ADMITTED);  // idle: any call, however large
  a.release(10, 5000);
  EXPECT_EQ(a.try_admit(1, 60, 0), Verdict::ADMITTED);
  EXPECT_EQ(a.try_admit(1, 50, 0), Verdict::TOO_MANY_TOKENS);  // 110 prompt tokens > 100
  EXPECT_EQ(a.try_admit(1, 40, 0), Verdict::ADMITTED);         // 100 fit
  EXPECT_EQ(a.try_admit(3, 0, 0), Verdict::QUEUE_FULL);        // 5 waiting > 4
  EXPECT_EQ(a.try_admit(3, 0, 1), Verdict::ADMITTED);          // one of them runs: 4 wait
  a.release(1, 60);
  EXPECT_EQ(a.try_admit(1, 50, 0), Verdict::QUEUE_FULL);  // 40 + 50 tokens fit, but 4 + 1 requests wait
  a.release(3, 0);
  EXPECT_EQ(a.try_admit(1, 60, 0), Verdict::ADMITTED);         // 40 + 60
  a.release(1, 40);
  a.release(1, 999);  // a miscount settles at 0 with the last request
  EXPECT_EQ(a.try_admit(1, 100, 0), Verdict::ADMITTED);
  EXPECT_EQ(a.try_admit(1, 1, 0), Verdict::TOO_MANY_TOKENS);
}

}  // namespace
}  // namespace tsr::server
