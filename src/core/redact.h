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
// A URL that does not parse is redacted as far as it can be read, never shown raw: the user info
// runs to the last '@' before the query (a password with a raw '@' or '/' is hidden whole, however
// a client would split it) or, when a raw '?' or '#' comes first, to the last '@' before the
// path (libpq and the Redis client take "u:pa#ss@h" as password "pa#ss"; a '@' in a query with
// no user info hides the host too: too much hidden rather than too little), and a URL without a
// scheme ("host:port/v2/KEY", "redis:/:pw@host") has its user info and key-like path segments
// hidden as an http URL's are. A libpq key=value conninfo ("host=db password='x' dbname=y") keeps
// everything but the password and sslpassword values. A comma-separated list of URLs is redacted
// element by element. Pure functions.
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

// Free text that may echo user input (a config line that does not parse, an argument CLI11
// did not expect, a library's error quoting what it was given): every token holding "://" or
// '@' is redacted as a URL list, and libpq's `password=VALUE` (quoted or not, spaces around '='
// or not) loses its value. Tokens end at white space and quotes (' " `); a URL cut there inside
// its password ("postgresql://u:pa ss@h", "scheme://u:pa'ss@h": a ':' followed by no port and
// no '@') runs on to the next token of the line holding '@', and without one everything after
// "://" is hidden.
std::string RedactText(std::string_view text);

// Where the user info of a URL ends, as RedactUrl reads it: `rest` is what follows "scheme://"
// (the whole URL when it has no scheme); the position of the '@' that ends the user info, or
// npos when there is none. Shared with the URL checks of the command line (cli/input_checks.h),
// so that what they call the user info is what the redactor hides.
size_t UserInfoEnd(std::string_view rest);

// text with every occurrence of each secret replaced by "***".
std::string ScrubSecrets(std::string text, const std::vector<std::string>& secrets);

}  // namespace gapless
