// `memrec whatif allocator` and the fragmentation culprits of `memrec stats`, as JSON and text.
#include "memrec/allocator_output.h"

#include <fmt/format.h>

#include "memrec/units.h"
#include "render.h"

namespace memrec {
namespace {

using nlohmann::json;

std::string limits_source(const DeviceLimits& m) {
  if (m.given) return "--device-memory";
  std::string out = m.recorded_total ? "the recording's device.total_memory" : "";
  if (m.oom_limit) out += std::string(out.empty() ? "" : "; ") + "limit from the recorded OOM (reserved + free then)";
  return out;
}

std::string note_text(AllocatorNote n, const AllocatorWhatif& w) {
  switch (n) {
    case AllocatorNote::assumed_defaults:
      return kAssumedDefaults;
    case AllocatorNote::memory_unknown:
      return "the device's memory is unknown: no limit assumed, so no release-and-retry or OOM is modelled (give it "
             "with --device-memory)";
    case AllocatorNote::fraction_ignored:
      return "per_process_memory_fraction and garbage_collection_threshold need the device's memory: ignored";
    case AllocatorNote::threshold_without_fraction:
      return "garbage_collection_threshold acts only with a memory fraction set (per_process_memory_fraction or "
             "torch.cuda.set_per_process_memory_fraction): without one it changes nothing";
    case AllocatorNote::out_of_memory: {
      uint64_t n = w.prediction.ooms;
      return fmt::format("out of memory: {} request{} would not fit in the device's {} ({}); the run stops at the "
                         "first, and the predicted peaks go on past it as if the device had room",
                         n, n == 1 ? "" : "s", format_bytes(w.memory.limit), limits_source(w.memory));
    }
  }
  return "";
}

json prediction_json(const SettingPrediction& p) {
  return {{"settings", p.settings},
          {"predicted_reserved_peak", p.reserved_peak},
          {"predicted_allocated_peak", p.allocated_peak},
          {"predicted_peak_ns", p.peak_ns},
          {"segments", p.segments},
          {"device_allocs", p.device_allocs},
          {"device_frees", p.device_frees},
          {"free_at_peak", p.free_at_peak},
          {"predicted_ooms", p.ooms},
          {"fits", p.fits()}};
}

json known(uint64_t bytes) { return bytes == UINT64_MAX ? json(nullptr) : json(bytes); }

void add_sweep(json& j, const AllocatorWhatif::Sweep& sweep) {
  json rows = json::array();
  for (const SettingPrediction& p : sweep.rows) {
    rows.push_back(prediction_json(p));
    rows.back()["saving"] = or_null(p.saving);
    rows.back()["own"] = p.own;
  }
  j["sweep_baseline"] = sweep.baseline;
  j["sweep"] = std::move(rows);
}

std::string settings_label(const std::string& text) { return text.empty() ? "(defaults)" : text; }

std::string runs_out(const SettingPrediction& p) { return fmt::format("runs out ({} OOM{})", p.ooms, p.ooms == 1 ? "" : "s"); }

std::string skipped(const FragmentationCulprits& c) {
  if (c.state == FragmentationCulprits::State::failed) return c.error;
  return fmt::format("more than {} events: run memrec whatif allocator for who fragmented the reserved memory and "
                     "what other settings would reserve", kCulpritsMaxEvents);
}

void render_culprits(std::string& out, const FragmentationCulprits& c) {
  out += fmt::format("\nwho fragmented the reserved memory at its peak (+{}, {} reserved, {} free; replayed under {}{}):\n",
                     format_duration(c.time_ns), format_bytes(c.reserved), format_bytes(c.free),
                     settings_label(c.settings), c.assumed ? ", assumed" : "");
  if (c.culprits.empty()) out += "  no segment holds both free space and live blocks\n";
  else out += fmt::format("  {:>12} {:>8} {:>12}  {:<23} {}\n", "free held", "blocks", "their bytes", "allocated", "site");
  for (const SiteCulprit& s : c.culprits) {
    const FragmentationCulprit& h = s.held;
    out += fmt::format("  {:>12} {:>8} {:>12}  {:<23} {}\n", format_bytes(h.free_bytes), h.blocks, format_bytes(h.block_bytes),
                       fmt::format("+{} .. +{}", format_duration(h.first_ns), format_duration(h.last_ns)), s.site);
  }
}

void render_savings(std::string& out, const FragmentationCulprits& c) {
  out += "what other allocator settings would reserve at the peak (memrec whatif allocator --sweep):\n";
  for (const SettingPrediction& p : c.settings_savings) {
    std::string what = runs_out(p);
    if (p.saving) what = fmt::format("{} {:>10}", *p.saving < 0 ? "costs" : "saves", format_bytes(magnitude(*p.saving)));
    out += fmt::format("  {:>12}  {:<16}  {}\n", format_bytes(p.reserved_peak), what, p.settings);
  }
}

void render_sweep(std::string& out, const AllocatorWhatif::Sweep& sweep) {
  out += fmt::format("\nsettings, best first (saving against the run's own settings, {} predicted):\n",
                     format_bytes(sweep.baseline));
  for (const SettingPrediction& p : sweep.rows) {
    std::string what = runs_out(p);
    if (p.saving)
      what = fmt::format("{:>11} {:>6.1f}%", signed_bytes(*p.saving),
                         sweep.baseline ? 100.0 * static_cast<double>(*p.saving) / static_cast<double>(sweep.baseline) : 0.0);
    out += fmt::format("  {:>12} {:>19}  {}{}\n", format_bytes(p.reserved_peak), what, settings_label(p.settings),
                       p.own ? "  (the run's)" : "");
  }
}

std::string_view source_text(SettingsSource s) {
  return s == SettingsSource::recorded ? "the run's own" : s == SettingsSource::assumed ? "assumed" : "given";
}

}  // namespace

std::string_view to_string(SettingsSource s) {
  switch (s) {
    case SettingsSource::given: return "--alloc-conf";
    case SettingsSource::recorded: return "recorded";
    case SettingsSource::assumed: return "assumed";
  }
  return "";
}

json allocator_whatif_json(const AllocatorWhatif& w) {
  json j = prediction_json(w.prediction);
  j["device"] = w.device;
  j["settings_source"] = to_string(w.source);
  j["recorded_settings"] = or_null(w.recorded_settings);
  j["recorded_reserved_peak"] = w.recorded_reserved_peak;
  j["recorded_segment_allocs"] = w.recorded_segment_allocs;
  j["recorded_ooms"] = w.recorded_ooms;
  j["requests"] = w.requests;
  j["device_memory"] = {{"total", known(w.memory.total)}, {"limit", known(w.memory.limit)}, {"source", limits_source(w.memory)}};
  j["notes"] = json::array();
  for (AllocatorNote n : w.notes) j["notes"].push_back(note_text(n, w));
  j["warnings"] = w.warnings;
  if (w.sweep) add_sweep(j, *w.sweep);
  return j;
}

std::string allocator_whatif_text(const AllocatorWhatif& w) {
  const SettingPrediction& p = w.prediction;
  std::string out;
  for (AllocatorNote n : w.notes) out += fmt::format("note: {}\n", note_text(n, w));
  out += fmt::format("device {}: {} requests replayed through the caching allocator model under {} ({})\n", w.device,
                     w.requests, settings_label(p.settings), source_text(w.source));
  if (w.recorded_settings && w.source != SettingsSource::recorded)
    out += fmt::format("the run was recorded with {}\n", settings_label(*w.recorded_settings));
  out += fmt::format("  {:<26}{:>12}{:>14}\n", "", "predicted", "recorded");
  out += fmt::format("  {:<26}{:>12}{:>14}\n", "peak reserved", format_bytes(p.reserved_peak),
                     format_bytes(w.recorded_reserved_peak));
  out += fmt::format("  {:<26}{:>12}\n", "peak allocated (blocks)", format_bytes(p.allocated_peak));
  out += fmt::format("  {:<26}{:>12}\n", "segments at the peak", p.segments);
  out += fmt::format("  {:<26}{:>12}{:>14}\n", "cudaMalloc / map calls", p.device_allocs, w.recorded_segment_allocs);
  out += fmt::format("  {:<26}{:>12}\n", "free at the peak", format_bytes(p.free_at_peak));
  if (p.ooms || w.recorded_ooms) out += fmt::format("  {:<26}{:>12}{:>14}\n", "OOMs", p.ooms, w.recorded_ooms);
  if (w.sweep) render_sweep(out, *w.sweep);
  return out;
}

json fragmentation_culprits_json(const FragmentationCulprits& c) {
  using State = FragmentationCulprits::State;
  if (c.state == State::no_segments) return json::object();
  if (c.state != State::found) return {{"skipped", skipped(c)}};
  json culprits = json::array(), savings = json::array();
  for (const SiteCulprit& s : c.culprits)
    culprits.push_back({{"site", s.site}, {"free_bytes", s.held.free_bytes}, {"blocks", s.held.blocks},
                        {"block_bytes", s.held.block_bytes}, {"first_ns", s.held.first_ns}, {"last_ns", s.held.last_ns}});
  for (const SettingPrediction& p : c.settings_savings)
    savings.push_back({{"settings", p.settings}, {"predicted_reserved_peak", p.reserved_peak},
                       {"predicted_ooms", p.ooms}, {"fits", p.fits()}, {"saving", or_null(p.saving)}});
  return {{"settings", c.settings}, {"settings_source", c.assumed ? "assumed" : "recorded"}, {"time_ns", c.time_ns},
          {"reserved", c.reserved}, {"free", c.free}, {"culprits", culprits}, {"settings_savings", savings}};
}

std::string fragmentation_culprits_text(const FragmentationCulprits& c) {
  using State = FragmentationCulprits::State;
  if (c.state == State::no_segments) return "";
  if (c.state != State::found) return fmt::format("fragmentation culprits: {}\n", skipped(c));
  std::string out;
  render_culprits(out, c);
  render_savings(out, c);
  return out;
}

}  // namespace memrec
