// The pages `memrec report` writes, read back for tests: the embedded timeline picture.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace memrec::test {

inline std::string base64_decode(std::string_view text) {
  static const std::string kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (char c : text) {
    size_t v = kAlphabet.find(c);
    if (v == std::string::npos) break;  // '=' padding ends the data
    bits = (bits << 6) | uint32_t(v);
    if ((count += 6) >= 8) out += char((bits >> (count -= 8)) & 0xFF);
  }
  return out;
}

// The decoded bytes of the page's data:<type>;base64 <img> ("image/png", "image/svg+xml"), or "" when there is none.
inline std::string embedded(const std::string& html, const std::string& type) {
  const std::string prefix = "src=\"data:" + type + ";base64,";
  size_t at = html.find(prefix);
  if (at == std::string::npos) return "";
  at += prefix.size();
  return base64_decode(std::string_view(html).substr(at, html.find('"', at) - at));
}

}  // namespace memrec::test
