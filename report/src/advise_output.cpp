#include "memrec/advise_output.h"

#include <fmt/format.h>

#include "memrec/report.h"
#include "memrec/units.h"

namespace memrec {
namespace {

nlohmann::json optional_json(const std::optional<uint64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }
nlohmann::json optional_json(const std::optional<int64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

nlohmann::json peak_json(const PeakBytes& p) {
  return {{"allocated", p.allocated}, {"reserved", optional_json(p.reserved)}};
}

nlohmann::json advice_json(const Advice& a) {
  nlohmann::json evidence = nlohmann::json::array();
  for (const Evidence& e : a.evidence) evidence.push_back({{"what", e.what}, {"bytes", e.bytes}});
  nlohmann::json cost = a.cost_ns ? nlohmann::json{{"recompute_ns", *a.cost_ns}} : nlohmann::json();
  return {{"kind", to_string(a.kind)}, {"change", a.change}, {"method", to_string(a.method)},
          {"saves", {{"allocated", a.saves.allocated}, {"reserved", optional_json(a.saves.reserved)}}},
          {"peak_after", peak_json(a.peak_after)}, {"cost", cost}, {"evidence", evidence},
          {"layers", a.layers}, {"settings", a.settings}};
}

// "1.50 GiB", with a minus sign where the change costs memory.
std::string signed_bytes(int64_t bytes) {
  return bytes < 0 ? "-" + format_bytes(static_cast<uint64_t>(-bytes)) : format_bytes(static_cast<uint64_t>(bytes));
}

std::string advice_text(size_t rank, const Advice& a) {
  std::string out = fmt::format("{}. [{}] {}\n", rank, to_string(a.kind), a.change);
  out += fmt::format("   saves {} ({}); peak after: {}\n", saves_text(a.saves), to_string(a.method),
                     peaks_text(a.peak_after));
  if (a.cost_ns) out += fmt::format("   recompute cost {} of kernel time\n", format_duration(*a.cost_ns));
  for (const Evidence& e : a.evidence) out += fmt::format("     {:>12}  {}\n", format_bytes(e.bytes), e.what);
  return out;
}

}  // namespace

std::string peaks_text(const PeakBytes& p) {
  return p.reserved ? fmt::format("{} allocated, {} reserved", format_bytes(p.allocated), format_bytes(*p.reserved))
                    : fmt::format("{} allocated", format_bytes(p.allocated));
}

std::string saves_text(const SavedBytes& s) {
  return s.reserved ? fmt::format("{} allocated, {} reserved", signed_bytes(s.allocated), signed_bytes(*s.reserved))
                    : fmt::format("{} allocated", signed_bytes(s.allocated));
}

nlohmann::json advise_json(const Advise& a) {
  nlohmann::json advice = nlohmann::json::array();
  for (const Advice& x : a.advice) advice.push_back(advice_json(x));
  return {{"device", a.device}, {"warnings", a.warnings}, {"peak", peak_json(a.peak)}, {"advice", advice},
          {"not_assessed", a.not_assessed}};
}

std::string advise_text(const Advise& a) {
  std::string out = fmt::format("recorded peak: {}\n", peaks_text(a.peak));
  if (a.advice.empty()) out += "no change found that lowers the peak\n";
  for (size_t i = 0; i < a.advice.size(); ++i) out += advice_text(i + 1, a.advice[i]);
  if (!a.not_assessed.empty()) out += "not assessed:\n";
  for (const std::string& n : a.not_assessed) out += fmt::format("  {}\n", n);
  return out;
}

std::string advise_html(const Advise& a) {
  std::string out = "<section id=\"advise\"><h2>What to change</h2>";
  out += fmt::format("<p>Each change with the bytes it saves against the recorded peak ({}): <i>replayed</i> from "
                     "this run's history with the change, <i>scaled</i> from runs at other sizes, or <i>counted</i> "
                     "at the peak (<code>memrec advise</code>).</p>",
                     html_escape(peaks_text(a.peak)));
  if (a.advice.empty()) out += "<p class=\"note\">No change found that lowers the peak.</p>";
  else out += "<table><thead><tr><th>Change</th><th class=\"num\">Saves</th><th class=\"num\">Peak after</th>"
              "<th>How</th></tr></thead><tbody>";
  for (const Advice& x : a.advice) {
    std::string saves = signed_bytes(x.saves.reserved ? *x.saves.reserved : x.saves.allocated);
    std::string after = format_bytes(x.peak_after.reserved ? *x.peak_after.reserved : x.peak_after.allocated);
    out += fmt::format("<tr><td class=\"key\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
                       "<td>{}</td></tr>",
                       html_escape(x.change), saves, after, to_string(x.method));
    for (const Evidence& e : x.evidence)
      out += fmt::format("<tr class=\"evidence\"><td class=\"key\">&nbsp;&nbsp;{}</td><td class=\"num\">{}</td>"
                         "<td></td><td></td></tr>",
                         html_escape(e.what), format_bytes(e.bytes));
  }
  if (!a.advice.empty()) out += "</tbody></table>";
  if (!a.not_assessed.empty()) {
    out += "<p class=\"note\">Not assessed:</p><ul class=\"note\">";
    for (const std::string& n : a.not_assessed) out += "<li>" + html_escape(n) + "</li>";
    out += "</ul>";
  }
  return out + "</section>";
}

}  // namespace memrec
