// The one place that decides what of a server address may be shown. Every log line, error message,
// status output, metric label and /status.json field that names a server passes its URL through
// RedactUrl first; nothing else strips credentials (issue 17: "one redaction function used by
// all").
//
// What is hidden, whatever the scheme (http, https, ws, postgresql, redis, rediss, amqp, amqps,
// kafka):
//   - the whole user info: "https://KEY@host" and "redis://:pass@host" alike become "***@host";
//   - the value of every query parameter except a few that are settings, never secrets (sslmode,
//     connect_timeout, ...): "?apikey=s3cret&sslmode=require" becomes
//     "?apikey=***&sslmode=require";
//   - the fragment;
//   - for http(s) and ws(s) URLs, every path segment that looks like a key: 8 or more characters
//     with a digit in them, or 16 or more of [A-Za-z0-9_-] ("/v2/APIKEY123" becomes "/v2/***").
//     Providers (Alchemy, Infura, QuickNode, ...) put the API key in the path. The path of the
//     other schemes is a database, a Redis db number or a vhost: shown as is.
// A libpq key=value conninfo ("host=db password='x' dbname=y") keeps everything but the password
// and sslpassword values. A comma-separated list of URLs is redacted element by element.
// Pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gapless {

inline constexpr std::string_view kRedacted = "***";

std::string RedactUrl(std::string_view url);

// "a,b,c" -> RedactUrl(a) + "," + ... (the --lock-nodes and --events lists).
std::string RedactUrlList(std::string_view urls);

// The parts of url that RedactUrl hides (user, password, key-like path segments, query values,
// fragment), each at least 4 characters long (shorter ones would match everywhere). For text that
// did not come from the URL itself: a provider's error body can echo the key it was given.
std::vector<std::string> SecretsOf(std::string_view url);

// text with every occurrence of each secret replaced by "***".
std::string ScrubSecrets(std::string text, const std::vector<std::string>& secrets);

}  // namespace gapless
