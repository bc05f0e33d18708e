#include "rpc/http_transport.h"

namespace gapless {

HttpTransport::~HttpTransport() = default;

}  // namespace gapless
