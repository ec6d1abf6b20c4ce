// Viewer tests that drive a real window: ctest runs without X, so such a test runs itself again inside xvfb-run.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "common/process.h"

namespace memrec::test {

// Without a display: runs the current test again under xvfb-run, expects it to pass there, and returns true (the
// caller returns). With one: returns false, and the caller runs the test.
inline bool rerun_under_xvfb() {
  if (std::getenv("DISPLAY")) return false;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string filter = std::string(info->test_suite_name()) + "." + info->name();
  auto r = run_command("xvfb-run -a /proc/" + std::to_string(getpid()) + "/exe --gtest_filter=" + quote(filter));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[  PASSED  ] 1 test"), std::string::npos) << r.output;
  return true;
}

}  // namespace memrec::test
