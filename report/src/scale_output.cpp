// `memrec whatif scale` as JSON and text.
#include "memrec/scale_output.h"

#include <algorithm>

#include <fmt/format.h>

#include "memrec/units.h"
#include "render.h"

namespace memrec {
namespace {

using nlohmann::json;
using Reason = UnmatchedAllocations::Reason;

std::string_view reason_code(Reason r) {
  switch (r) {
    case Reason::base_only: return "base_only";
    case Reason::not_in_base: return "not_in_base";
    case Reason::below_zero: return "below_zero";
  }
  return "";
}

std::string reason_text(const UnmatchedAllocations& u, const ScaleWhatif& w) {
  switch (u.reason) {
    case Reason::base_only: return "only in this run: kept at its size";
    case Reason::not_in_base: return fmt::format("not in {}: left out", w.runs[w.base].name);
    case Reason::below_zero: return fmt::format("fit below zero from size {}: taken as 0", u.at_size);
  }
  return "";
}

std::string memory_source(const ScaleMemory& m) {
  if (m.given) return "--device-memory";
  if (!m.bytes) return "unknown";
  if (!m.outside) return "the recording's device total";
  return fmt::format("the recording's device total less {} outside the allocator", format_bytes(*m.outside));
}


json prediction_json(const ScalePrediction& p) {
  json growth = json::array();
  for (const ScaleGrowth& g : p.growth)
    growth.push_back({{"key", g.key}, {"bytes", g.bytes}, {"recorded", g.recorded}, {"growth", g.growth()}});
  return {{"size", p.size}, {"peak_allocated", p.peak_allocated}, {"peak_reserved", or_null(p.peak_reserved)},
          {"oom", or_null(p.oom)}, {"ooms", p.ooms}, {"peak_ns", p.peak_ns}, {"step", p.step}, {"phase", p.phase},
          {"growth", growth}};
}

json unmatched_json(const UnmatchedAllocations& u, const ScaleWhatif& w) {
  json j = {{"run", w.runs[u.run].name}, {"size", w.runs[u.run].size}, {"reason", reason_code(u.reason)},
            {"site", u.site}, {"count", u.count}, {"bytes", u.bytes}};
  if (u.reason == Reason::below_zero) j["at_size"] = u.at_size;
  return j;
}



void render_runs(std::string& out, const ScaleWhatif& w) {
  out += fmt::format("device {}: {} runs matched by scope, site and order; predictions rewrite {} (size {})\n",
                     w.device, w.runs.size(), w.runs[w.base].name, w.runs[w.base].size);
  out += fmt::format("  {:>8} {:>15} {:>12} {:>9}  {}\n", "size", "peak allocated", "allocations", "matched", "run");
  for (const ScaleWhatif::Run& r : w.runs)
    out += fmt::format("  {:>8} {:>15} {:>12} {:>8.1f}%  {}\n", r.size, format_bytes(r.peak_allocated), r.allocations,
                       r.allocations ? 100.0 * static_cast<double>(r.matched) / static_cast<double>(r.allocations) : 0.0,
                       r.name);
}

void render_predictions(std::string& out, const ScaleWhatif& w) {
  const ScaleMemory& m = w.memory;
  out += fmt::format("\npredicted{}; device memory {}:\n",
                     w.settings ? fmt::format(" (allocator settings {})", w.settings->empty() ? "(defaults)" : *w.settings) : "",
                     m.bytes ? fmt::format("{} ({})", format_bytes(*m.bytes), memory_source(m)) : "unknown");
  out += fmt::format("  {:>8} {:>15} {:>14} {:>5}  {}\n", "size", "peak allocated", "peak reserved", "fits", "allocated peak in");
  for (const ScalePrediction& p : w.predictions)
    out += fmt::format("  {:>8} {:>15} {:>14} {:>5}  {}\n", p.size, format_bytes(p.peak_allocated),
                       p.peak_reserved ? format_bytes(*p.peak_reserved) : "-", scale_fits_text(p),
                       scale_where_text(p, p.peak_ns));
}

void render_growth(std::string& out, const ScaleWhatif& w) {
  out += fmt::format("\nwhat grows most, live at each predicted peak (bytes, and change from {}):\n", w.runs[w.base].name);
  for (const ScalePrediction& p : w.predictions) {
    out += fmt::format("  size {}:\n", p.size);
    for (const ScaleGrowth& g : p.growth)
      out += fmt::format("  {:>12} {:>12}  {}\n", format_bytes(g.bytes), signed_bytes(g.growth(), "+"), g.key);
  }
}

void render_unmatched(std::string& out, const ScaleWhatif& w) {
  constexpr size_t kShown = 10;
  size_t name = 3;
  for (const ScaleWhatif::Run& r : w.runs) name = std::max(name, r.name.size());
  out += fmt::format("\nallocations not matched across the runs ({} groups):\n", w.unmatched.size());
  out += fmt::format("  {:>8} {:>12}  {:<{}}  {}\n", "count", "bytes", "run", name, "site");
  for (size_t i = 0; i < w.unmatched.size() && i < kShown; ++i) {
    const UnmatchedAllocations& u = w.unmatched[i];
    out += fmt::format("  {:>8} {:>12}  {:<{}}  {} ({})\n", u.count, format_bytes(u.bytes), w.runs[u.run].name, name,
                       u.site, reason_text(u, w));
  }
  if (w.unmatched.size() > kShown) out += fmt::format("  ... {} more (--json lists all)\n", w.unmatched.size() - kShown);
}

}  // namespace

std::string scale_note_text(ScaleNote n, const ScaleWhatif& w) {
  switch (n) {
    case ScaleNote::cpu:
      return "a CPU run: libtorch's CPU allocator keeps no cache, so there is no reserved peak to predict";
    case ScaleNote::memory_unknown:
      return "the device's memory is unknown: whether a size runs out of memory is not predicted (give it with "
             "--device-memory)";
    case ScaleNote::outside_unmeasured:
      return "the run has no NVML samples, so the memory outside the allocator (the CUDA context, NCCL) is not "
             "known: the device's whole memory is taken as available";
    case ScaleNote::assumed_defaults:
      return kAssumedDefaults;
    case ScaleNote::no_limit_found:
      return fmt::format("no size up to {} runs out of the device's {}: the peak does not grow with the size",
                         kLargestFitted, format_bytes(w.memory.bytes.value_or(0)));
  }
  return "";
}

std::string scale_fits_text(const ScalePrediction& p) {
  if (!p.oom) return "?";
  return *p.oom ? "OOM" : "yes";
}

std::string scale_where_text(const ScalePrediction& p, int64_t peak_ns) {
  std::string where = p.step;
  if (!p.phase.empty()) where += (where.empty() ? "" : ", ") + p.phase;
  return fmt::format("{}{}+{}", where, where.empty() ? "" : " at ", format_duration(peak_ns));
}

json scale_whatif_json(const ScaleWhatif& w) {
  json runs = json::array(), predictions = json::array(), unmatched = json::array(), notes = json::array();
  for (size_t j = 0; j < w.runs.size(); ++j) {
    const ScaleWhatif::Run& r = w.runs[j];
    runs.push_back({{"file", r.name}, {"size", r.size}, {"peak_allocated", r.peak_allocated},
                    {"allocations", r.allocations}, {"matched", r.matched}, {"base", j == w.base}});
  }
  for (const ScalePrediction& p : w.predictions) predictions.push_back(prediction_json(p));
  for (const UnmatchedAllocations& u : w.unmatched) unmatched.push_back(unmatched_json(u, w));
  for (ScaleNote n : w.notes) notes.push_back(scale_note_text(n, w));
  json fit = w.fit ? json{{"largest", w.fit->largest}, {"device_memory", w.fit->device_memory}, {"margin", w.fit->margin}}
                   : json(nullptr);
  const ScaleMemory& m = w.memory;
  return {{"device", w.device},
          {"runs", runs},
          {"settings", or_null(w.settings)},
          {"settings_source", w.settings ? json(to_string(w.source)) : json(nullptr)},
          {"device_memory", {{"bytes", or_null(m.bytes)}, {"source", memory_source(m)},
                             {"total", m.total ? json(m.total) : json(nullptr)}, {"outside_allocator", or_null(m.outside)}}},
          {"predictions", predictions},
          {"fit", fit},
          {"unmatched", unmatched},
          {"notes", notes},
          {"warnings", w.warnings}};
}

std::string scale_whatif_text(const ScaleWhatif& w) {
  std::string out;
  for (ScaleNote n : w.notes) out += fmt::format("note: {}\n", scale_note_text(n, w));
  render_runs(out, w);
  if (!w.predictions.empty()) render_predictions(out, w);
  if (w.fit)
    out += fmt::format("\nlargest size that fits: {} ({} to spare of {})\n", w.fit->largest,
                       signed_bytes(w.fit->margin), format_bytes(w.fit->device_memory));
  if (!w.predictions.empty()) render_growth(out, w);
  if (!w.unmatched.empty()) render_unmatched(out, w);
  return out;
}

}  // namespace memrec
