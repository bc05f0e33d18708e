#include "testing/replay_transport.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

namespace gapless {

namespace od = simdjson::ondemand;

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// s as the inside of a JSON string literal.
std::string JsonEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out.append(fmt::format("\\u{:04x}", static_cast<int>(c)));
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() &&
         (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return FailedPrecondition("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The raw JSON text of v, without trailing whitespace. Consumes v.
simdjson::error_code RawJson(od::value v, std::string_view* out) {
  od::json_type type;
  if (auto e = v.type().get(type)) return e;
  if (type == od::json_type::object) {
    od::object o;
    if (auto e = v.get_object().get(o)) return e;
    if (auto e = o.raw_json().get(*out)) return e;
  } else if (type == od::json_type::array) {
    od::array a;
    if (auto e = v.get_array().get(a)) return e;
    if (auto e = a.raw_json().get(*out)) return e;
  } else {
    *out = v.raw_json_token();
  }
  *out = Trim(*out);
  return simdjson::SUCCESS;
}

bool ValidJson(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(json);
  return parser.parse(padded).error() == simdjson::SUCCESS;
}

// The "result"/"error" member of a recorded response envelope, as a response fragment.
Result<std::string> FragmentOfEnvelope(std::string_view envelope) {
  simdjson::padded_string padded(envelope);
  od::parser parser;
  od::document doc;
  od::object obj;
  if (auto e = parser.iterate(padded).get(doc); e || (e = doc.get_object().get(obj))) {
    return InvalidData(
        fmt::format("recorded response is not a JSON object ({})", simdjson::error_message(e)));
  }
  for (auto field : obj) {
    std::string_view key;
    od::value v;
    if (auto e = field.unescaped_key().get(key); e || (e = field.value().get(v))) {
      return InvalidData(
          fmt::format("malformed recorded response ({})", simdjson::error_message(e)));
    }
    if (key == "result" || key == "error") {
      std::string_view raw;
      if (auto e = RawJson(v, &raw)) {
        return InvalidData(
            fmt::format("malformed recorded {} ({})", key, simdjson::error_message(e)));
      }
      return fmt::format("\"{}\":{}", key, raw);
    }
  }
  return InvalidData("recorded response has neither result nor error");
}

// ethereum-etl's mock provider turns each param into a file name part with str(param).lower();
// dicts become sorted key_value pairs and lists are flattened (see MANIFEST §1).
void AppendEtlToken(simdjson::dom::element e, std::vector<std::string>* parts) {
  switch (e.type()) {
    case simdjson::dom::element_type::STRING:
      parts->push_back(Lower(std::string_view(e.get_string().value())));
      break;
    case simdjson::dom::element_type::BOOL:
      parts->push_back(e.get_bool().value() ? "true" : "false");
      break;
    case simdjson::dom::element_type::NULL_VALUE:
      parts->push_back("none");
      break;
    case simdjson::dom::element_type::INT64:
      parts->push_back(std::to_string(e.get_int64().value()));
      break;
    case simdjson::dom::element_type::UINT64:
      parts->push_back(std::to_string(e.get_uint64().value()));
      break;
    case simdjson::dom::element_type::DOUBLE:
      parts->push_back(fmt::format("{}", e.get_double().value()));
      break;
    case simdjson::dom::element_type::ARRAY: {
      simdjson::dom::array array = e.get_array().value();
      for (simdjson::dom::element item : array) AppendEtlToken(item, parts);
      break;
    }
    case simdjson::dom::element_type::OBJECT: {
      std::vector<std::pair<std::string, simdjson::dom::element>> fields;
      simdjson::dom::object object = e.get_object().value();
      for (auto field : object) {
        fields.emplace_back(std::string(field.key), field.value);
      }
      std::sort(fields.begin(), fields.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      for (auto& [key, value] : fields) {
        parts->push_back(key);
        AppendEtlToken(value, parts);
      }
      break;
    }
  }
}

std::string RegistrationKey(std::string_view method, std::string_view params_json) {
  return fmt::format("{}\n{}", method, ReplayTransport::CanonicalParams(params_json));
}

}  // namespace

Result<std::vector<JsonRpcCall>> ParseJsonRpcRequests(std::string_view body, bool* is_batch) {
  simdjson::padded_string padded(body);
  od::parser parser;
  od::document doc;
  od::json_type type;
  auto bad = [](std::string_view what, simdjson::error_code e) {
    return InvalidData(
        fmt::format("not a JSON-RPC request: {} ({})", what, simdjson::error_message(e)));
  };
  if (auto e = parser.iterate(padded).get(doc); e || (e = doc.type().get(type))) {
    return bad("malformed JSON", e);
  }
  std::vector<JsonRpcCall> calls;
  auto parse_one = [&](od::object obj) -> Status {
    JsonRpcCall call;
    call.id_json = "null";
    bool has_method = false;
    for (auto field : obj) {
      std::string_view key;
      od::value v;
      if (auto e = field.unescaped_key().get(key); e || (e = field.value().get(v))) {
        return bad("malformed request", e);
      }
      std::string_view raw;
      if (key == "id") {
        if (auto e = RawJson(v, &raw)) return bad("malformed id", e);
        call.id_json = std::string(raw);
      } else if (key == "method") {
        if (auto e = v.get_string().get(raw)) return bad("method is not a string", e);
        call.method = std::string(raw);
        has_method = true;
      } else if (key == "params") {
        if (auto e = RawJson(v, &raw)) return bad("malformed params", e);
        call.params_json = std::string(raw);
      }
    }
    if (!has_method) return InvalidData("not a JSON-RPC request: no method");
    calls.push_back(std::move(call));
    return Status::Ok();
  };
  if (type == od::json_type::object) {
    *is_batch = false;
    od::object obj;
    if (auto e = doc.get_object().get(obj)) return bad("malformed request", e);
    GAPLESS_RETURN_IF_ERROR(parse_one(obj));
  } else if (type == od::json_type::array) {
    *is_batch = true;
    od::array arr;
    if (auto e = doc.get_array().get(arr)) return bad("malformed batch", e);
    for (auto element : arr) {
      od::object obj;
      if (auto e = element.get_object().get(obj)) return bad("batch element", e);
      GAPLESS_RETURN_IF_ERROR(parse_one(obj));
    }
  } else {
    return InvalidData("not a JSON-RPC request: neither an object nor an array");
  }
  if (doc.current_location().error() != simdjson::OUT_OF_BOUNDS) {
    return InvalidData("not a JSON-RPC request: trailing content");
  }
  return calls;
}

std::string ReplayTransport::CanonicalParams(std::string_view params_json) {
  std::string_view trimmed = Trim(params_json);
  if (trimmed.empty()) trimmed = "[]";
  std::string out(trimmed.size(), '\0');
  size_t len = 0;
  if (simdjson::minify(trimmed.data(), trimmed.size(), out.data(), len) != simdjson::SUCCESS) {
    return Lower(trimmed);
  }
  out.resize(len);
  return Lower(out);
}

Result<std::string> ReplayTransport::EthereumEtlKey(std::string_view method,
                                                    std::string_view params_json) {
  std::string_view trimmed = Trim(params_json);
  if (trimmed.empty()) trimmed = "[]";
  simdjson::dom::parser parser;
  simdjson::padded_string padded(trimmed);
  simdjson::dom::element params;
  if (parser.parse(padded).get(params) != simdjson::SUCCESS) {
    return InvalidData(fmt::format("params are not JSON: {}", trimmed));
  }
  std::vector<std::string> parts;
  AppendEtlToken(params, &parts);
  std::string key = Lower(method);
  for (const std::string& part : parts) {
    key.push_back('_');
    key.append(Lower(part));
  }
  return key;
}

Status ReplayTransport::Register(std::string_view method, std::string_view params_json,
                                 std::string fragment) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  registered_[RegistrationKey(method, params_json)] = std::move(fragment);
  return Status::Ok();
}

Status ReplayTransport::Add(std::string_view method, std::string_view params_json,
                            std::string_view result_json) {
  std::string_view result = Trim(result_json);
  if (!ValidJson(result)) {
    return InvalidData(fmt::format("Add({}): the result is not valid JSON", method));
  }
  return Register(method, params_json, fmt::format("\"result\":{}", result));
}

Status ReplayTransport::AddFile(std::string_view method, std::string_view params_json,
                                const std::string& path) {
  GAPLESS_ASSIGN_OR_RETURN(std::string content, ReadFile(path));
  Status st = Add(method, params_json, content);
  return st.WithContext(path);
}

Status ReplayTransport::AddError(std::string_view method, std::string_view params_json,
                                 int64_t code, std::string_view message) {
  return Register(
      method, params_json,
      fmt::format(R"("error":{{"code":{},"message":"{}"}})", code, JsonEscape(message)));
}

Status ReplayTransport::AddEthereumEtlDirectory(const std::string& dir) {
  constexpr std::string_view kPrefix = "web3_response.";
  constexpr std::string_view kSuffix = ".json";
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) return FailedPrecondition(fmt::format("cannot list {}: {}", dir, ec.message()));
  int added = 0;
  for (const auto& entry : it) {
    std::string name = entry.path().filename().string();
    if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) continue;
    std::string key =
        Lower(name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size()));
    GAPLESS_ASSIGN_OR_RETURN(std::string content, ReadFile(entry.path().string()));
    Result<std::string> fragment = FragmentOfEnvelope(content);
    if (!fragment.ok()) return fragment.status().WithContext(entry.path().string());
    std::unique_lock<std::shared_mutex> lock(mu_);
    etl_[key] = std::move(*fragment);
    ++added;
  }
  if (added == 0)
    return FailedPrecondition(fmt::format("no web3_response.*.json files in {}", dir));
  return Status::Ok();
}

Status ReplayTransport::AddExecutionApisFile(const std::string& path) {
  GAPLESS_ASSIGN_OR_RETURN(std::string content, ReadFile(path));
  std::istringstream lines(content);
  std::string line;
  std::optional<std::string> request;
  int line_no = 0;
  while (std::getline(lines, line)) {
    ++line_no;
    std::string_view l = Trim(line);
    auto where = [&] { return fmt::format("{}:{}", path, line_no); };
    if (l.starts_with(">>")) {
      request = std::string(Trim(l.substr(2)));
    } else if (l.starts_with("<<")) {
      if (!request) return InvalidData(where() + ": response without a request");
      bool is_batch = false;
      Result<std::vector<JsonRpcCall>> calls = ParseJsonRpcRequests(*request, &is_batch);
      if (!calls.ok()) return calls.status().WithContext(where());
      if (is_batch || calls->size() != 1)
        return InvalidData(where() + ": batch requests not supported");
      Result<std::string> fragment = FragmentOfEnvelope(Trim(l.substr(2)));
      if (!fragment.ok()) return fragment.status().WithContext(where());
      GAPLESS_RETURN_IF_ERROR(
          Register((*calls)[0].method, (*calls)[0].params_json, std::move(*fragment)));
      request.reset();
    }
  }
  return Status::Ok();
}

Status ReplayTransport::AddExecutionApisDirectory(const std::string& dir) {
  std::error_code ec;
  std::filesystem::recursive_directory_iterator it(dir, ec);
  if (ec) return FailedPrecondition(fmt::format("cannot list {}: {}", dir, ec.message()));
  std::vector<std::string> files;
  for (const auto& entry : it) {
    if (entry.is_regular_file() && entry.path().extension() == ".io") {
      files.push_back(entry.path().string());
    }
  }
  std::sort(files.begin(), files.end());  // deterministic: a later file wins a duplicate request
  for (const std::string& f : files) GAPLESS_RETURN_IF_ERROR(AddExecutionApisFile(f));
  return Status::Ok();
}

void ReplayTransport::SetChainId(uint64_t chain_id) {
  std::unique_lock<std::shared_mutex> lock(mu_);
  chain_id_ = chain_id;
}

int64_t ReplayTransport::calls(std::string_view method) const {
  std::lock_guard<std::mutex> lock(counts_mu_);
  auto it = counts_.find(method);
  return it == counts_.end() ? 0 : it->second;
}

std::optional<std::string> ReplayTransport::Lookup(const JsonRpcCall& call) const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  if (call.method == "eth_chainId" && chain_id_) {
    return fmt::format("\"result\":\"0x{:x}\"", *chain_id_);
  }
  if (auto it = registered_.find(RegistrationKey(call.method, call.params_json));
      it != registered_.end()) {
    return it->second;
  }
  if (!etl_.empty()) {
    Result<std::string> key = EthereumEtlKey(call.method, call.params_json);
    if (key.ok()) {
      if (auto it = etl_.find(*key); it != etl_.end()) return it->second;
    }
  }
  return std::nullopt;
}

Result<HttpResponse> ReplayTransport::Post(std::string_view body) {
  ++posts_;
  HttpResponse response;
  response.status = 200;
  bool is_batch = false;
  Result<std::vector<JsonRpcCall>> calls = ParseJsonRpcRequests(body, &is_batch);
  if (!calls.ok()) {
    response.body = fmt::format(R"({{"jsonrpc":"2.0","id":null,"error":{{"code":-32700,)"
                                R"("message":"parse error"}}}})");
    return response;
  }
  {
    std::lock_guard<std::mutex> lock(counts_mu_);
    for (const JsonRpcCall& call : *calls) ++counts_[call.method];
  }
  std::string& out = response.body;
  if (is_batch) out.push_back('[');
  for (size_t i = 0; i < calls->size(); ++i) {
    const JsonRpcCall& call = (*calls)[i];
    if (i > 0) out.push_back(',');
    out.append(R"({"jsonrpc":"2.0","id":)");
    out.append(call.id_json);
    out.push_back(',');
    std::optional<std::string> fragment = Lookup(call);
    if (fragment) {
      out.append(*fragment);
    } else {
      out.append(fmt::format(
          R"json("error":{{"code":-32601,"message":"replay: no recorded answer for {}({})"}})json",
          JsonEscape(call.method), JsonEscape(CanonicalParams(call.params_json))));
    }
    out.push_back('}');
  }
  if (is_batch) out.push_back(']');
  return response;
}

}  // namespace gapless
