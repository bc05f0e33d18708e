// ParseEvents: ABI JSON -> events, on simdjson's DOM API (an ABI is read once at start-up, so
// the simplest API wins; the DOM also validates the whole document first). Every error names
// the entry, the event and the field: `ABI entry 3 (event Swap): input 2 "amount": unknown type
// "uint7"`.
#include <simdjson.h>

#include <utility>

#include "abi/abi.h"

namespace gapless::abi {
namespace {

namespace dom = simdjson::dom;

const char* JsonTypeName(dom::element_type type) {
  switch (type) {
    case dom::element_type::ARRAY:
      return "an array";
    case dom::element_type::OBJECT:
      return "an object";
    case dom::element_type::STRING:
      return "a string";
    case dom::element_type::INT64:
    case dom::element_type::UINT64:
    case dom::element_type::DOUBLE:
      return "a number";
    case dom::element_type::BOOL:
      return "a boolean";
    case dom::element_type::NULL_VALUE:
      return "null";
  }
  return "a value";
}

Status WrongJsonType(std::string_view field, const char* expected, dom::element v) {
  return InvalidData("\"" + std::string(field) + "\" is " + JsonTypeName(v.type()) + ", not " +
                     expected);
}

// The string field `field` of `object` into *out; `*found` false (and Ok) when it is absent.
Status OptString(dom::object object, std::string_view field, std::string_view* out, bool* found) {
  dom::element v;
  *found = false;
  if (object[field].get(v) != simdjson::SUCCESS) return Status::Ok();
  if (v.get_string().get(*out) != simdjson::SUCCESS) return WrongJsonType(field, "a string", v);
  *found = true;
  return Status::Ok();
}

// An optional boolean field, false when absent.
Status OptBool(dom::object object, std::string_view field, bool* out) {
  dom::element v;
  *out = false;
  if (object[field].get(v) != simdjson::SUCCESS) return Status::Ok();
  if (v.get_bool().get(*out) != simdjson::SUCCESS) return WrongJsonType(field, "a boolean", v);
  return Status::Ok();
}

// An optional array field, empty when absent (or null).
Status OptArray(dom::object object, std::string_view field, dom::array* out, bool* found) {
  dom::element v;
  *found = false;
  if (object[field].get(v) != simdjson::SUCCESS || v.is_null()) return Status::Ok();
  if (v.get_array().get(*out) != simdjson::SUCCESS) return WrongJsonType(field, "an array", v);
  *found = true;
  return Status::Ok();
}

// Solidity's (and Vyper's) identifiers: [A-Za-z_$][A-Za-z0-9_$]*. An event name goes into the
// signature that topic 0 hashes, so anything else there is a broken ABI.
bool IsIdentifier(std::string_view name) {
  auto letter = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$';
  };
  if (name.empty() || !letter(name[0])) return false;
  for (char c : name) {
    if (!letter(c) && !(c >= '0' && c <= '9')) return false;
  }
  return true;
}

std::string Named(std::string_view what, size_t i, std::string_view name) {
  std::string out = std::string(what) + " " + std::to_string(i);
  if (!name.empty()) out += " \"" + std::string(name) + "\"";
  return out;
}

Status ParseParam(dom::element v, int depth, std::string* name, Type* type, bool* indexed);

// The members of a tuple: types and names.
Status ParseComponents(dom::array components, int depth, std::vector<Type>* types,
                       std::vector<std::string>* names) {
  size_t i = 0;
  for (dom::element c : components) {
    std::string name;
    Type type;
    bool indexed = false;
    Status st = ParseParam(c, depth, &name, &type, &indexed);
    if (!st.ok()) {
      std::string_view raw;
      bool found = false;
      dom::object o;
      if (c.get_object().get(o) == simdjson::SUCCESS) (void)OptString(o, "name", &raw, &found);
      return st.WithContext(Named("component", i, raw));
    }
    types->push_back(std::move(type));
    names->push_back(std::move(name));
    ++i;
  }
  return Status::Ok();
}

// One input (or tuple component): {"name", "type", "indexed", "components"}.
Status ParseParam(dom::element v, int depth, std::string* name, Type* type, bool* indexed) {
  dom::object o;
  if (v.get_object().get(o) != simdjson::SUCCESS) {
    return InvalidData(std::string("is ") + JsonTypeName(v.type()) + ", not an object");
  }
  std::string_view text;
  bool found = false;
  GAPLESS_RETURN_IF_ERROR(OptString(o, "name", &text, &found));
  *name = std::string(text);
  GAPLESS_RETURN_IF_ERROR(OptString(o, "type", &text, &found));
  if (!found) return InvalidData("no \"type\"");
  GAPLESS_RETURN_IF_ERROR(OptBool(o, "indexed", indexed));
  dom::array components_json;
  bool has_components = false;
  GAPLESS_RETURN_IF_ERROR(OptArray(o, "components", &components_json, &has_components));
  std::vector<Type> components;
  std::vector<std::string> names;
  if (has_components && components_json.size() > 0) {
    if (depth >= kMaxTypeDepth) {
      return InvalidData("tuples nest more than " + std::to_string(kMaxTypeDepth) + " deep");
    }
    GAPLESS_RETURN_IF_ERROR(ParseComponents(components_json, depth + 1, &components, &names));
  }
  GAPLESS_ASSIGN_OR_RETURN(*type, ParseType(text, std::move(components), std::move(names)));
  return Status::Ok();
}

// The event of entry `where` ("ABI entry 3"); errors read "ABI entry 3 (event Swap): ...".
Status ParseEvent(dom::object entry, const std::string& where, Event* event) {
  std::string_view name;
  bool found = false;
  GAPLESS_RETURN_IF_ERROR(OptString(entry, "name", &name, &found).WithContext(where + " (event)"));
  if (name.empty()) return InvalidData(where + ": an event without a \"name\"");
  if (!IsIdentifier(name)) {
    return InvalidData(where + ": event name \"" + std::string(name) + "\" is not an identifier");
  }
  event->name = std::string(name);
  std::string context = where + " (event " + event->name + ")";
  dom::array inputs;
  bool has_inputs = false;
  GAPLESS_RETURN_IF_ERROR(OptBool(entry, "anonymous", &event->anonymous).WithContext(context));
  GAPLESS_RETURN_IF_ERROR(OptArray(entry, "inputs", &inputs, &has_inputs).WithContext(context));
  size_t i = 0;
  int indexed = 0;
  if (has_inputs) {
    for (dom::element v : inputs) {
      Param p;
      Status st = ParseParam(v, 0, &p.name, &p.type, &p.indexed);
      if (!st.ok()) {
        std::string_view raw;
        dom::object o;
        if (v.get_object().get(o) == simdjson::SUCCESS) (void)OptString(o, "name", &raw, &found);
        return st.WithContext(context + ": " + Named("input", i, raw));
      }
      indexed += p.indexed ? 1 : 0;
      event->inputs.push_back(std::move(p));
      ++i;
    }
  }
  int max_indexed = event->anonymous ? 4 : 3;
  if (indexed > max_indexed) {
    return InvalidData(context + ": " + std::to_string(indexed) +
                       " indexed inputs, more than the " + std::to_string(max_indexed) +
                       (event->anonymous ? " an anonymous" : " a non-anonymous") +
                       " event can have");
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<Event>> ParseEvents(std::string_view json) {
  dom::parser parser;
  simdjson::padded_string padded(json);
  dom::element root;
  if (simdjson::error_code e = parser.parse(padded).get(root); e != simdjson::SUCCESS) {
    return InvalidData(std::string("ABI JSON does not parse: ") + simdjson::error_message(e));
  }
  dom::array entries;
  if (root.get_array().get(entries) != simdjson::SUCCESS) {
    dom::element abi;
    if (!root.is_object() || root["abi"].get(abi) != simdjson::SUCCESS ||
        abi.get_array().get(entries) != simdjson::SUCCESS) {
      return InvalidData(std::string("ABI JSON is ") + JsonTypeName(root.type()) +
                         ", not an array of entries or an object with an \"abi\" array");
    }
  }
  std::vector<Event> events;
  size_t i = 0;
  for (dom::element v : entries) {
    std::string where = "ABI entry " + std::to_string(i++);
    dom::object entry;
    if (v.get_object().get(entry) != simdjson::SUCCESS) {
      return InvalidData(where + ": is " + JsonTypeName(v.type()) + ", not an object");
    }
    std::string_view type;
    bool found = false;
    GAPLESS_RETURN_IF_ERROR(OptString(entry, "type", &type, &found).WithContext(where));
    if (type != "event") continue;  // absent means "function" (the oldest solc output)
    Event event;
    GAPLESS_RETURN_IF_ERROR(ParseEvent(entry, where, &event));
    events.push_back(std::move(event));
  }
  return events;
}

}  // namespace gapless::abi
