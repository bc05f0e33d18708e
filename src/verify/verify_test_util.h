// Test helpers for verify/: fixture files and decoded fixture blocks.
#pragma once

#include <string>

#include "core/model.h"

namespace gapless::verify_testing {

// The content of GAPLESS_FIXTURES_DIR/relative; fails the test (empty string) if unreadable.
std::string ReadFixture(const std::string& relative);
// The compact "result" of the first "<<" response of an execution-apis .io file.
std::string IoResult(const std::string& relative);

// Mainnet block 17000000 (mainnet/17000000/block.json + receipts.json) through DecodeBlock.
const BlockData& Mainnet17000000();

}  // namespace gapless::verify_testing
