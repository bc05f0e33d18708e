#include "core/status.h"

namespace gapless {

const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "OK";
    case Code::kUnavailable:
      return "Unavailable";
    case Code::kAborted:
      return "Aborted";
    case Code::kInvalidData:
      return "InvalidData";
    case Code::kFailedPrecondition:
      return "FailedPrecondition";
    case Code::kNotFound:
      return "NotFound";
    case Code::kDataLoss:
      return "DataLoss";
    case Code::kInternal:
      return "Internal";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code_)) + ": " + message_;
}

}  // namespace gapless
