#include "memrec/report.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "memrec/advise_output.h"
#include "memrec/device_memory_output.h"
#include "memrec/growth_output.h"
#include "memrec/stats.h"
#include "memrec/timeline_svg.h"
#include "memrec/units.h"
#include "memrec/whatif.h"
#include "html_parts.h"
#include "render.h"

namespace memrec {
namespace {

std::string device_memory_html(const std::optional<DeviceMemoryStats>& d) {
  if (!d) return "";
  return "<section id=\"device-memory\"><h2>Device memory</h2><pre>" + html_escape(device_memory_text(*d)) +
         "</pre></section>";
}

constexpr std::string_view kStyle = R"css(
:root { --fg: #1f2328; --muted: #59636e; --line: #d1d9e0; --soft: #f6f8fa; --accent: #0969da; }
* { box-sizing: border-box; }
body { margin: 0; background: #fff; color: var(--fg);
  font: 14px/1.45 -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 28px 32px 48px; }
h1 { font-size: 24px; margin: 0 0 4px; font-weight: 600; }
h1 .file { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-weight: 500; }
h2 { font-size: 18px; margin: 36px 0 10px; padding-bottom: 6px; border-bottom: 1px solid var(--line); font-weight: 600; }
h3 { font-size: 14px; margin: 18px 0 6px; font-weight: 600; }
p { margin: 6px 0; }
.sub, .note, .exact, .detail { color: var(--muted); }
.warn { background: #fff8c5; border: 1px solid #d4a72c66; border-radius: 6px; padding: 8px 12px; margin: 12px 0; }
.cards { display: flex; flex-wrap: wrap; gap: 14px; margin-top: 20px; }
.card { flex: 1 1 240px; border: 1px solid var(--line); border-radius: 8px; padding: 12px 16px; background: var(--soft); }
.card .label { font-size: 12px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); }
.card .value { font-size: 26px; font-weight: 600; font-variant-numeric: tabular-nums; }
.timeline img { display: block; width: 100%; height: auto; border: 1px solid var(--line); border-radius: 6px; }
table { border-collapse: collapse; width: 100%; margin: 6px 0 4px; }
th, td { text-align: left; padding: 5px 10px; border-bottom: 1px solid var(--line); vertical-align: baseline; }
th { font-size: 12px; color: var(--muted); font-weight: 600; background: var(--soft); }
td.num, th.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
td.key { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: 12.5px; overflow-wrap: anywhere; }
tr.total td { font-weight: 600; }
td.barcell { width: 28%; min-width: 160px; }
.bar { display: flex; height: 12px; margin-top: 4px; background: #eef1f4; border-radius: 3px; overflow: hidden; }
.bar span { display: block; height: 100%; }
.legend { display: flex; flex-wrap: wrap; gap: 14px; margin: 4px 0 8px; color: var(--muted); font-size: 12px; }
.legend i, i.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 5px; vertical-align: -1px; }
.c-parameter { background: #4f8fdc; } .c-input { background: #8fa9c4; } .c-activation { background: #f08c3c; }
.c-gradient { background: #3fa66b; } .c-optimizer_state { background: #9a6ad6; } .c-temporary { background: #e0c040; }
.c-unknown { background: #a0a4a8; } .c-total { background: #0969da; }
.narrow { max-width: 760px; }
footer { margin-top: 40px; color: var(--muted); font-size: 12px; }
)css";

constexpr Category kCategoryOrder[] = {Category::activation, Category::parameter, Category::gradient,
                                      Category::optimizer_state, Category::input, Category::temporary, Category::unknown};

std::string label(std::string_view category) {
  std::string out(category);
  std::replace(out.begin(), out.end(), '_', ' ');
  return out;
}

// A horizontal bar: one colored piece per (css class, fraction of the full width).
std::string bar(const std::vector<std::pair<std::string, double>>& pieces) {
  std::string out = "<div class=\"bar\">";
  for (const auto& [css, fraction] : pieces)
    out += fmt::format("<span class=\"{}\" style=\"width:{:.2f}%\"></span>", html_escape(css), std::clamp(fraction, 0.0, 1.0) * 100.0);
  return out + "</div>";
}

std::string legend(const std::vector<Category>& categories) {
  std::string out = "<div class=\"legend\">";
  for (Category c : categories) out += fmt::format("<span><i class=\"c-{}\"></i>{}</span>", to_string(c), label(to_string(c)));
  return out + "</div>";
}

// Categories that occur in any row, in a fixed order so colors and columns read the same in every report.
std::vector<Category> categories_in(const std::vector<GroupRow>& rows) {
  std::vector<Category> out;
  for (Category c : kCategoryOrder)
    if (std::any_of(rows.begin(), rows.end(), [&](const GroupRow& r) { return r.by_category[static_cast<int>(c)] != 0; }))
      out.push_back(c);
  return out;
}

std::string peak_card(const char* id, const char* title, const PeakShown& p) {
  return fmt::format("<div class=\"card\" id=\"{}\"><div class=\"label\">{}</div><div class=\"value\">{}</div>"
                     "<div class=\"detail\">{}</div><div class=\"exact\">{} bytes</div></div>",
                     id, title, format_bytes(p.bytes), peak_when(p, " · "), grouped(p.bytes));
}

std::string header(const Snapshot& s, const ReportOptions& o, const StatsResult& stats) {
  std::string out = fmt::format("<header><h1>memrec report: <span class=\"file\">{}</span></h1>", html_escape(o.file_name));
  std::vector<std::string> facts;
  for (const std::string& key : std::vector<std::string>{"workload", fmt::format("device.{}.name", o.device), "torch_version"}) {
    auto it = s.metadata.find(key);
    if (it != s.metadata.end() && !it->second.empty())
      facts.push_back(html_escape(key == "torch_version" ? "torch " + it->second : it->second));
  }
  facts.push_back(fmt::format("device {}: {} events over {}", o.device, stats.events, format_duration(stats.duration_ns)));
  out += "<p class=\"sub\">" + fmt::format("{}", fmt::join(facts, " · ")) + "</p></header>";
  for (const std::string& w : stats.warnings) out += "<p class=\"warn\">" + html_escape(w) + "</p>";
  if (stats.dropped_events)
    out += fmt::format("<p class=\"warn\">{} events were dropped while recording.</p>", stats.dropped_events);
  return out;
}

std::string timeline(const Snapshot& s, const ReportOptions& o) {
  std::string out = "<section class=\"timeline\" id=\"timeline\"><h2>Timeline</h2>";
  if (o.png.empty())
    return out + "<img id=\"timeline-svg\" alt=\"Memory timeline: allocated and reserved bytes over time, the peak "
           "marked\" src=\"data:image/svg+xml;base64," + base64_encode(timeline_svg(s, o.device)) + "\">"
           "<p class=\"note\">Drawn without a display (<code>memrec report --format svg</code>), as there is no "
           "screenshot: " + html_escape(o.missing_png) + ".</p></section>";
  return out + "<img alt=\"Memory timeline: allocated blocks over time, the peak marked in red\" src=\"data:image/png;base64," +
         base64_encode(o.png) + "\">"
         "<p class=\"note\">Rendered by <code>memrec view --screenshot --at peak</code>: each band is one allocation, "
         "colored by call site; the white line is allocated bytes, the orange line reserved bytes, the red line the "
         "peak" + std::string(o.scale ? "; the dashed lines are the prediction at another size (below)" : "") +
         ".</p></section>";
}

std::string layer_table(const StatsResult& layers) {
  // Largest first as `memrec stats --by layer` prints them; equal layers in model order.
  std::vector<GroupRow> rows = layers.live;
  std::stable_sort(rows.begin(), rows.end(), [](const GroupRow& a, const GroupRow& b) {
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    return natural_less(a.key, b.key);
  });
  auto cats = categories_in(rows);
  uint64_t total = layers.at.allocated;
  std::string out = "<section id=\"layers\"><h2>Live at the peak by layer</h2>";
  out += fmt::format("<p>{} live at the allocated peak, attributed to transformer layers by the recorded module scopes "
                     "(<code>memrec stats --by layer</code>).</p>", format_bytes(total));
  out += legend(cats) + "<table><thead><tr><th>Layer</th><th class=\"num\">Live</th><th class=\"num\">Share</th><th></th>";
  for (Category c : cats) out += "<th class=\"num\">" + label(to_string(c)) + "</th>";
  out += "</tr></thead><tbody>";
  for (const GroupRow& r : rows) {
    std::vector<std::pair<std::string, double>> pieces;
    for (Category c : cats)
      if (uint64_t bytes = r.by_category[static_cast<int>(c)])
        pieces.emplace_back("c-" + std::string(to_string(c)), total ? double(bytes) / double(total) : 0.0);
    out += fmt::format("<tr class=\"layer\"><td class=\"key\">{}</td>{}<td class=\"num\">{}</td><td class=\"barcell\">{}</td>",
                       html_escape(r.key), bytes_cell(r.bytes), percent(r.share), bar(pieces));
    for (Category c : cats) {
      uint64_t bytes = r.by_category[static_cast<int>(c)];
      out += bytes ? bytes_cell(bytes) : "<td class=\"num\">–</td>";
    }
    out += "</tr>";
  }
  return out + "</tbody></table></section>";
}

std::string whatif_row(const char* css, const std::string& what, const CheckpointPrediction& p) {
  uint64_t saving = p.recorded_peak - std::min(p.recorded_peak, p.predicted_peak);
  double share = p.recorded_peak ? (double(p.recorded_peak) - double(p.predicted_peak)) / double(p.recorded_peak) : 0.0;
  double fraction = p.recorded_peak ? double(p.predicted_peak) / double(p.recorded_peak) : 0.0;
  return fmt::format("<tr class=\"{}\"><td class=\"key\">{}</td>{}<td class=\"num\">+{}</td>{}<td class=\"num\">{}</td>"
                     "<td class=\"barcell\">{}</td></tr>",
                     css, html_escape(what), bytes_cell(p.predicted_peak), format_duration(p.predicted_peak_ns),
                     bytes_cell(saving), percent(share), bar({{"c-total", fraction}}));
}

std::string whatif(const Snapshot& s, const ReportOptions& o) {
  std::string out = "<section id=\"whatif\"><h2>What if: activation checkpointing</h2>";
  std::optional<CheckpointPredictor> predictor;
  CheckpointPrediction all;
  try {
    predictor.emplace(s, o.device);
    all = predictor->predict({});
  } catch (const Error& e) {
    return out + "<p class=\"note\" id=\"whatif-unavailable\">Not available for this run: " + html_escape(e.what()) +
           ".</p></section>";
  }
  out += fmt::format("<p>The history replayed with each checkpointed layer's activations (except its output) freed when "
                     "its forward ends and allocated again when its backward starts "
                     "(<code>memrec whatif checkpoint</code>; the recomputation's own temporaries are not modelled). "
                     "Recorded peak allocated: <b>{}</b>.</p>", format_bytes(all.recorded_peak));
  out += "<table><thead><tr><th>Checkpointed</th><th class=\"num\">Predicted peak</th><th class=\"num\">At</th>"
         "<th class=\"num\">Saving</th><th class=\"num\">Saving %</th><th>Predicted / recorded</th></tr></thead><tbody>";
  out += whatif_row("total", fmt::format("all {} layers", all.layers.size()), all);
  for (const std::string& layer : all.layers) out += whatif_row("single", layer, predictor->predict({layer}));
  return out + "</tbody></table></section>";
}

std::string what_to_change(const Snapshot& s, const ReportOptions& o) {
  try {
    return advise_html(advise(s, o.device, {}));
  } catch (const Error& e) {
    return "<section id=\"advise\"><h2>What to change</h2><p class=\"note\">Not available for this run: " +
           html_escape(e.what()) + ".</p></section>";
  }
}

std::string category_table(const StatsResult& by_category) {
  const std::vector<GroupRow>& rows = by_category.live;
  std::string out = "<section id=\"categories\"><h2>Live at the peak by category</h2>";
  std::vector<std::pair<std::string, double>> pieces;
  for (const GroupRow& r : rows) pieces.emplace_back("c-" + r.key, r.share);
  out += "<div class=\"narrow\">" + bar(pieces) + "</div><table class=\"narrow\"><thead><tr><th>Category</th><th class=\"num\">Live</th><th class=\"num\">Share</th>"
         "<th class=\"num\">Blocks</th></tr></thead><tbody>";
  for (const GroupRow& r : rows)
    out += fmt::format("<tr><td><i class=\"swatch c-{0}\"></i>{1}</td>{2}<td class=\"num\">{3}</td><td class=\"num\">{4}</td></tr>",
                       html_escape(r.key), html_escape(label(r.key)), bytes_cell(r.bytes), percent(r.share), r.count);
  return out + "</tbody></table><p class=\"note\">Categories come from the forward/backward/optimizer phases, "
               "recorded or inferred from the frames, and each block's lifetime (see docs/analysis.md).</p></section>";
}

std::string sites_table(const char* title, const std::vector<SiteRow>& rows) {
  std::string out = fmt::format("<h3>{}</h3><table><thead><tr><th class=\"num\">Bytes</th><th class=\"num\">Count</th>"
                                "<th>Site</th></tr></thead><tbody>", title);
  for (const SiteRow& r : rows)
    out += fmt::format("<tr>{}<td class=\"num\">{}×</td><td class=\"key\">{}</td></tr>", bytes_cell(r.bytes), r.count,
                       html_escape(r.key));
  return out + "</tbody></table>";
}

std::string sites(const StatsResult& stats) {
  return "<section id=\"sites\"><h2>Top allocation sites</h2><p class=\"note\">Allocated over the whole run, by site: "
         "the first frame of the program's own code (docs/attribution.md), then the op that allocated.</p>" +
         sites_table("By bytes", stats.top_by_bytes) + sites_table("By count", stats.top_by_count) + "</section>";
}

std::string fragmentation_rows(const Fragmentation& f) {
  std::string out = "<table class=\"narrow\"><tbody>";
  for (const FragmentationPart& part : kFragmentationParts)
    out += fmt::format("<tr><td>{}</td>{}</tr>", part.label, bytes_cell(f.*part.bytes));
  return out + "</tbody></table>";
}

std::string fragmentation(const Fragmentation& f) {
  std::string out = "<section id=\"fragmentation\"><h2>Fragmentation at the peak</h2>";
  if (f.segments == 0)
    return out + fmt::format("<p class=\"note\">No reserved segments were recorded ({}), so there is nothing to split.</p>"
                             "</section>", why_no_segments(f));
  out += fmt::format("<p>Reserved − allocated = <b>{}</b> in {} segments:</p>",
                     format_bytes(f.reserved - std::min(f.reserved, f.allocated)), f.segments);
  out += fragmentation_rows(f);
  if (f.unplaced)
    out += fmt::format("<p class=\"note\">Not counted: {} allocated in segments the recording does not hold.</p>",
                       format_bytes(f.unplaced));
  return out + "</section>";
}

std::string oom(const OomShown& o) {
  std::string out = fmt::format("<h3>OOM at +{}</h3><p>Requested <b>{}</b>{}; {} allocated, {} reserved.</p>",
                                format_duration(o.time_ns), format_bytes(o.requested),
                                o.device_free ? fmt::format("; the device had {} free", format_bytes(o.device_free)) : "",
                                format_bytes(o.allocated), format_bytes(o.reserved));
  if (o.caused_by_fragmentation)
    out += fmt::format("<p class=\"warn\">Caused by fragmentation: {} was cached but the largest free range was {}.</p>",
                       format_bytes(o.cached), format_bytes(o.fragmentation.largest_free));
  else
    out += "<p class=\"warn\">Not fragmentation: the program needed more memory than the device had.</p>";
  return out + groups_table("Held", "Site", o.top_sites) + fragmentation_rows(o.fragmentation);
}

std::string ooms(const StatsResult& stats) {
  if (stats.ooms.empty()) return "";
  std::string out = "<section id=\"ooms\"><h2>Out of memory</h2>";
  for (const OomShown& o : stats.ooms) out += oom(o);
  return out + "</section>";
}

std::string kernels(const StatsResult& stats) {
  if (stats.kernels.empty()) return "";
  std::string out = "<section id=\"kernels\"><h2>Top kernels by GPU time</h2><table><thead><tr><th class=\"num\">Total</th>"
                    "<th class=\"num\">Count</th><th class=\"num\">Avg</th><th class=\"num\">Max</th><th>Name</th></tr></thead><tbody>";
  for (const KernelStats& k : stats.kernels)
    out += fmt::format("<tr><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
                       "<td class=\"key\">{}</td></tr>",
                       format_duration(k.total_ns), k.count, format_duration(k.avg_ns()), format_duration(k.max_ns),
                       html_escape(k.name));
  return out + "</tbody></table></section>";
}

std::string metadata(const Snapshot& s) {
  if (s.metadata.empty()) return "";
  std::string out = "<section id=\"run\"><h2>Run</h2><table><tbody>";
  for (const auto& [key, value] : s.metadata)
    out += fmt::format("<tr><td>{}</td><td class=\"key\">{}</td></tr>", html_escape(key), html_escape(value));
  return out + "</tbody></table></section>";
}

bool has_module_scopes(const Snapshot& s, uint8_t device) {
  return std::any_of(s.scopes.begin(), s.scopes.end(),
                     [&](const Scope& sc) { return sc.kind == ScopeKind::module && sc.device == device; });
}

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string base64_encode(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t n = uint32_t(uint8_t(bytes[i])) << 16;
    if (i + 1 < bytes.size()) n |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) n |= uint8_t(bytes[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

bool is_png(std::string_view bytes) { return bytes.starts_with("\x89PNG\r\n\x1a\n"); }

std::string report_html(const Snapshot& s, const ReportOptions& o) {
  StatsResult by_category = stats(s, {.at_ns = std::nullopt, .by = GroupBy::category, .top = o.top, .device = o.device, .kernels = true});
  std::string body = header(s, o, by_category);
  body += "<section class=\"cards\">" + peak_card("peak-allocated", "Peak allocated", by_category.peak_allocated) +
          peak_card("peak-reserved", "Peak reserved", by_category.peak_reserved) + "</section>";
  body += what_to_change(s, o) + timeline(s, o) + owners_section(s, o);
  if (o.scale) body += scale_section_html(*o.scale);
  // Every layer gets a row, however many there are: the table answers "which layer holds the most".
  if (has_module_scopes(s, o.device))
    body += layer_table(stats(s, {.at_ns = std::nullopt, .by = GroupBy::layer, .top = SIZE_MAX, .device = o.device}));
  body += growth_html(growth(s, {.device = o.device, .device_memory = std::nullopt, .first_step = std::nullopt,
                                 .last_step = std::nullopt}));
  body += whatif(s, o) + category_table(by_category) + sites(by_category) + fragmentation(by_category.fragmentation) +
          device_memory_html(by_category.device_memory) + ooms(by_category) + kernels(by_category) + metadata(s);
  return fmt::format("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                     "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                     "<title>memrec report: {}</title><style>{}</style></head>\n<body><main>\n{}\n"
                     "<footer>Made by <code>memrec report</code>. The same numbers: <code>memrec stats</code>, "
                     "<code>memrec stats --by layer</code>, <code>memrec growth</code>, <code>memrec whatif checkpoint</code>.</footer>"
                     "</main></body></html>\n",
                     html_escape(o.file_name), kStyle, body);
}

}  // namespace memrec
