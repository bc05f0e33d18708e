#include "rpc/curl_transport.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <charconv>
#include <cstring>
#include <mutex>

#include "core/redact.h"
#include "core/text.h"

namespace gapless {
namespace {

// simdjson reads up to 64 bytes past the end of its input; keeping that much spare capacity in
// the body lets the client parse it in place without a copy.
constexpr size_t kBodyPadding = 64;

void GlobalInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace

std::optional<int64_t> ParseRetryAfter(std::string_view value, int64_t now_unix_micros) {
  value = Trim(value);
  if (value.empty()) return std::nullopt;
  if (value.front() >= '0' && value.front() <= '9') {
    int64_t seconds = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
    if (ec != std::errc() || ptr != value.data() + value.size()) return std::nullopt;
    if (seconds > 365LL * 24 * 3600) return std::nullopt;  // nonsense; use our own backoff
    return seconds * 1'000'000;
  }
  std::string date(value);
  time_t when = curl_getdate(date.c_str(), nullptr);
  if (when < 0) return std::nullopt;
  int64_t delta = static_cast<int64_t>(when) * 1'000'000 - now_unix_micros;
  return delta > 0 ? delta : 0;
}

struct CurlTransport::Handle {
  CURL* curl = nullptr;
  curl_slist* headers = nullptr;
  char error[CURL_ERROR_SIZE] = {};
  // Per-exchange state the callbacks write into.
  HttpResponse* response = nullptr;
  size_t max_bytes = 0;
  bool too_large = false;
  bool content_encoded = false;  // gzip etc.: Content-Length counts the encoded bytes
  int64_t now_unix_micros = 0;

  ~Handle() {
    if (curl != nullptr) curl_easy_cleanup(curl);
    if (headers != nullptr) curl_slist_free_all(headers);
  }

  static size_t OnBody(char* data, size_t size, size_t nmemb, void* user) {
    auto* h = static_cast<Handle*>(user);
    size_t n = size * nmemb;
    std::string& body = h->response->body;
    if (body.size() + n > h->max_bytes) {
      h->too_large = true;
      return 0;  // makes libcurl abort the transfer with CURLE_WRITE_ERROR
    }
    if (body.capacity() < body.size() + n + kBodyPadding) {
      body.reserve(std::max(body.capacity() * 2, body.size() + n + kBodyPadding));
    }
    body.append(data, n);
    return n;
  }

  static size_t OnHeader(char* data, size_t size, size_t nmemb, void* user) {
    auto* h = static_cast<Handle*>(user);
    size_t n = size * nmemb;
    std::string_view line(data, n);
    if (line.starts_with("HTTP/")) {
      // A new response (e.g. after "100 Continue"): forget the previous one's headers.
      h->response->retry_after_micros.reset();
      h->content_encoded = false;
      return n;
    }
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) return n;
    std::string_view name = Trim(line.substr(0, colon));
    std::string_view value = Trim(line.substr(colon + 1));
    if (EqualsIgnoreCase(name, "retry-after")) {
      h->response->retry_after_micros = ParseRetryAfter(value, h->now_unix_micros);
    } else if (EqualsIgnoreCase(name, "content-encoding")) {
      h->content_encoded = !EqualsIgnoreCase(value, "identity");
    } else if (EqualsIgnoreCase(name, "content-length")) {
      size_t length = 0;
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), length);
      if (ec == std::errc() && length <= h->max_bytes) {
        h->response->body.reserve(length + kBodyPadding);
      }
    }
    return n;
  }
};

CurlTransport::CurlTransport(std::string url, CurlTransportOptions options)
    : url_(std::move(url)),
      redacted_url_(RedactUrl(url_)),
      secrets_(SecretsOf(url_)),
      options_(std::move(options)) {
  GlobalInitOnce();
  if (options_.env == nullptr) options_.env = Env::Default();
  handle_ = std::make_unique<Handle>();
  handle_->curl = curl_easy_init();
  if (handle_->curl == nullptr) return;
  CURL* c = handle_->curl;
  handle_->headers = curl_slist_append(handle_->headers, "Content-Type: application/json");
  handle_->headers = curl_slist_append(handle_->headers, "Accept: application/json");
  // No "Expect: 100-continue" round trip for large batch bodies.
  handle_->headers = curl_slist_append(handle_->headers, "Expect:");
  for (const std::string& header : options_.headers) {
    handle_->headers = curl_slist_append(handle_->headers, header.c_str());
  }
  curl_easy_setopt(c, CURLOPT_URL, url_.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, handle_->headers);
  curl_easy_setopt(c, CURLOPT_POST, 1L);
  curl_easy_setopt(c, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM for DNS timeouts
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.connect_timeout_ms));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.request_timeout_ms));
  curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(c, CURLOPT_TCP_KEEPIDLE, 30L);
  curl_easy_setopt(c, CURLOPT_TCP_KEEPINTVL, 15L);
  curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");  // gzip/deflate if the server offers it
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, handle_->error);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &Handle::OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, handle_.get());
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &Handle::OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, handle_.get());
}

CurlTransport::~CurlTransport() = default;

std::string CurlTransport::Scrub(std::string text) const {
  return ScrubSecrets(std::move(text), secrets_);
}

Result<HttpResponse> CurlTransport::Post(std::string_view body) {
  if (handle_ == nullptr || handle_->curl == nullptr) {
    return Unavailable(fmt::format("POST {}: could not create a libcurl handle", redacted_url_));
  }
  CURL* c = handle_->curl;
  HttpResponse response;
  handle_->response = &response;
  handle_->max_bytes = options_.max_response_bytes;
  handle_->too_large = false;
  handle_->content_encoded = false;
  handle_->now_unix_micros = options_.env->WallMicros();
  handle_->error[0] = '\0';
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));

  CURLcode rc = curl_easy_perform(c);
  handle_->response = nullptr;
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, nullptr);
  if (rc != CURLE_OK) {
    if (handle_->too_large) {
      return Unavailable(fmt::format("POST {}: answer larger than {} bytes", redacted_url_,
                                     options_.max_response_bytes));
    }
    std::string detail = handle_->error[0] != '\0' ? handle_->error : "";
    // The detail can quote the URL as given (with credentials); keep only libcurl's summary then.
    if (!detail.empty() && url_ != redacted_url_ && detail.find(url_) != std::string::npos) {
      detail.clear();
    }
    if (rc == CURLE_PARTIAL_FILE) {
      return Unavailable(
          fmt::format("POST {}: truncated body (shorter than its Content-Length){}{}",
                      redacted_url_, detail.empty() ? "" : ": ", detail));
    }
    if (rc == CURLE_OPERATION_TIMEDOUT) {
      return Unavailable(
          fmt::format("POST {}: timed out (connect timeout {} ms, request timeout {} "
                      "ms){}{}",
                      redacted_url_, options_.connect_timeout_ms, options_.request_timeout_ms,
                      detail.empty() ? "" : ": ", detail));
    }
    // libcurl's detail ("Failed to connect to 127.0.0.1 port 1 after 0 ms: Connection refused")
    // says more than its summary ("Couldn't connect to server"); the summary is the fallback.
    return Unavailable(fmt::format("POST {}: {}", redacted_url_,
                                   detail.empty() ? curl_easy_strerror(rc) : detail));
  }
  long status = 0;  // NOLINT(runtime/int)
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  response.status = status;
  // Belt and braces: libcurl reports CURLE_PARTIAL_FILE for a short body, but check the length
  // it announced too (it is -1 when the server sent none, or when the body was decoded).
  curl_off_t announced = -1;
  curl_easy_getinfo(c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &announced);
  if (!handle_->content_encoded && announced >= 0 &&
      static_cast<curl_off_t>(response.body.size()) < announced) {
    return Unavailable(fmt::format("POST {}: truncated body: {} of {} bytes", redacted_url_,
                                   response.body.size(), announced));
  }
  return response;
}

}  // namespace gapless
