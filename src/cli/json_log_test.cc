#include "cli/json_log.h"

#include <gtest/gtest.h>
#include <simdjson.h>

namespace gapless {
namespace {

std::chrono::system_clock::time_point At(int64_t ms) {
  return std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
}

TEST(JsonLog, OneObjectPerLineWithTheFieldsTheMessageNames) {
  // 2026-11-27T16:31:30.454Z
  const auto t = At(1795797090454);
  EXPECT_EQ(JsonLogLine(t, "info",
                        "worker vm:14586:2: task 20-39 attempt 1/5 failed: \"quoted\"\nsecond"),
            "{\"time\":\"2026-11-27T16:31:30.454Z\",\"level\":\"info\",\"module\":\"worker\","
            "\"worker\":\"vm:14586:2\",\"range\":\"20-39\",\"message\":\"worker vm:14586:2: task "
            "20-39 attempt 1/5 failed: \\\"quoted\\\"\\nsecond\"}\n");
  EXPECT_EQ(JsonLogLine(t, "warning",
                        "leader vm:1: re-org: rolled back 3 stored blocks above block 9 (epoch 4)"),
            "{\"time\":\"2026-11-27T16:31:30.454Z\",\"level\":\"warning\",\"module\":\"leader\","
            "\"epoch\":4,\"message\":\"leader vm:1: re-org: rolled back 3 stored blocks above "
            "block 9 (epoch 4)\"}\n");
  // No known module, no fields.
  EXPECT_EQ(JsonLogLine(t, "error", "Unavailable: connect to 127.0.0.1:9 failed"),
            "{\"time\":\"2026-11-27T16:31:30.454Z\",\"level\":\"error\",\"module\":\"gapless\","
            "\"message\":\"Unavailable: connect to 127.0.0.1:9 failed\"}\n");
  EXPECT_NE(JsonLogLine(t, "info", "done: blocks 0..402 are committed").find("\"range\":\"0-402\""),
            std::string::npos);
}

TEST(JsonLog, EveryLineParsesAsJson) {
  simdjson::dom::parser parser;
  for (const char* message : {"plain", "tab\there", "ctrl \x01 char", "unicode ✓", "{\"a\":1}"}) {
    std::string line = JsonLogLine(At(0), "info", message);
    simdjson::dom::element e;
    ASSERT_EQ(parser.parse(line).get(e), simdjson::SUCCESS) << line;
    std::string_view m;
    ASSERT_EQ(e["message"].get_string().get(m), simdjson::SUCCESS);
    EXPECT_EQ(m, message);
  }
}

TEST(JsonLog, TheLastLogFormatGivenDecides) {
  EXPECT_TRUE(AsksForJsonLog({"--log-format", "json"}));
  EXPECT_TRUE(AsksForJsonLog({"--log-format=text", "--db", "x", "--log-format=json"}));
  EXPECT_FALSE(AsksForJsonLog({"--log-format=json", "--log-format", "text"}));
  EXPECT_FALSE(AsksForJsonLog({"--log-format", "xml"}));
  EXPECT_FALSE(AsksForJsonLog({"--db", "json", "--log-format"}));
  EXPECT_FALSE(AsksForJsonLog({}));
}

}  // namespace
}  // namespace gapless
