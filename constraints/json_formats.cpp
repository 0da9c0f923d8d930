#include "constraints/internal/json_formats.h"

#include <map>
#include <set>

#include "constraints/errors.h"

namespace tsr::constraints {
namespace {

// Days per month exactly, February 29 only in leap years (Gregorian rules).
constexpr const char* kDate =
    R"(( [0-9]{4} "-" ( ( "0" [13578] | "1" [02] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ) | ( "0" [469] | "11" ) "-" ( "0" [1-9] | [12] [0-9] | "30" ) | "02-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] ) ) | ( [0-9]{2} ( "0" [48] | [2468] [048] | [13579] [26] ) | ( [02468] [048] | [13579] [26] ) "00" ) "-02-29" ))";
constexpr const char* kTime =
    R"(( ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" ( [0-5] [0-9] | "60" ) ( "." [0-9]+ )? ( [Zz] | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ) ))";
constexpr const char* kOctet = R"(( "25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9] ))";
constexpr const char* kLabel = R"(( [A-Za-z0-9] ( [A-Za-z0-9-]{0,61} [A-Za-z0-9] )? ))";

}  // namespace

std::optional<std::string> format_gbnf(const std::string& format) {
  static const std::map<std::string, std::string> formats = {
      {"date", kDate},
      {"time", kTime},
      {"date-time", std::string("( ") + kDate + " [Tt] " + kTime + " )"},
      {"uuid", R"(( [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} ))"},
      {"email", R"(( [A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+ "@" [A-Za-z0-9-]+ ( "." [A-Za-z0-9-]+ )* ))"},
      {"ipv4", std::string("( ") + kOctet + " ( \".\" " + kOctet + " ){3} )"},
      {"hostname", std::string("( ") + kLabel + " ( \".\" " + kLabel + " )* )"},
      {"uri", R"(( [A-Za-z] [A-Za-z0-9+.-]* ":" [^"\\\x00-\x20<>{}|^`\x7F]* ))"},
  };
  // Formats of the JSON Schema vocabulary that validators check (Python's jsonschema
  // FormatChecker among them).
  static const std::set<std::string> asserted = {
      "idn-email", "idn-hostname", "ipv6", "iri", "iri-reference", "uri-reference",
      "uri-template", "regex", "json-pointer", "relative-json-pointer", "duration", "color"};
  auto it = formats.find(format);
  if (it == formats.end()) {
    if (asserted.count(format)) throw CompileError("unsupported JSON Schema format '" + format + "'");
    return std::nullopt;
  }
  return it->second;
}

}  // namespace tsr::constraints
