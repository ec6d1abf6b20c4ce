// Allocation inspector: one block's size, stream, life, full stack, enclosing scopes and the kernels that ran
// while it was live.
#include <algorithm>

#include "memrec/devices.h"
#include "memrec/sites.h"
#include "memrec/units.h"
#include "views.h"

namespace memrec::viewer {
namespace {

constexpr size_t kMaxKernels = 200;

void draw_life(const Document& doc, const Allocation& a) {
  const Timeline& tl = *doc.timeline;
  auto when = [&](uint32_t step) {
    return step == kNoEvent ? std::string("-") : format_duration(tl.time_of(step) - tl.begin_ns());
  };
  ImGui::Text("allocated  %s", a.alloc_step == kNoEvent ? "before the recording" : when(a.alloc_step).c_str());
  ImGui::Text("freed      %s", a.free_step == kNoEvent || a.free_step == kBeforeStart ? "never (live at the end)"
                                                                                      : when(a.free_step).c_str());
  if (a.completed_step != kNoEvent) ImGui::Text("released   %s", when(a.completed_step).c_str());
  if (a.alloc_step != kNoEvent && a.free_step < kBeforeStart)
    ImGui::Text("lifetime   %s", format_duration(tl.time_of(a.free_step) - tl.time_of(a.alloc_step)).c_str());
}

void draw_scopes(const Document& doc, const Allocation& a) {
  const Snapshot& s = doc.snapshot;
  if (a.scope == 0 || a.scope >= s.scopes.size()) {
    ImGui::TextDisabled("allocated outside any recorded scope");
    return;
  }
  for (uint32_t sc = a.scope, hops = 0; sc != 0 && sc < s.scopes.size() && hops < 64; sc = s.scopes[sc].parent, ++hops)
    ImGui::BulletText("%s  %s", std::string(to_string(s.scopes[sc].kind)).c_str(), s.strings[s.scopes[sc].name].c_str());
}

void draw_kernels(const Document& doc, const Allocation& a) {
  const Timeline& tl = *doc.timeline;
  int64_t from = a.alloc_step == kNoEvent ? tl.begin_ns() : tl.time_of(a.alloc_step);
  int64_t to = a.free_step < kBeforeStart ? tl.time_of(a.free_step) : tl.end_ns();
  size_t total = 0, shown = 0;
  for (const Lane& lane : doc.kernel_lanes) {
    size_t first = lane.first_ending_after(from), last = lane.first_starting_at(to);
    if (last <= first) continue;
    total += last - first;
    for (auto k = first; k < last && shown < kMaxKernels; ++k, ++shown) {
      const Kernel& kn = doc.snapshot.kernels[lane.ids[k]];
      ImGui::Text("%-10s %s  %s", lane.title.c_str(), format_duration(kn.end_ns - kn.start_ns).c_str(),
                  doc.snapshot.strings[kn.name].c_str());
    }
  }
  if (total == 0) ImGui::TextDisabled(doc.kernel_lanes.empty() ? "no kernels recorded" : "no kernel ran while it was live");
  else if (total > shown) ImGui::TextDisabled("... %zu kernels in all", total);
}

}  // namespace

std::string owner_text(const Document& doc, uint32_t id) {
  std::string name = owner_label(doc.snapshot, *doc.replay, id);
  if (name.empty()) return name;
  return name + " (" + std::string(to_string(doc.snapshot.owners[doc.replay->owner_of(id)].kind)) + ")";
}

void draw_inspector(const Document& doc, ViewState& state) {
  const auto& allocs = doc.replay->allocations();
  if (state.selected_allocation == kNone || state.selected_allocation >= allocs.size()) {
    ImGui::TextDisabled("Click a band in the timeline to inspect its block.");
    return;
  }
  const Allocation& a = allocs[state.selected_allocation];
  ImGui::Text("block      %s (%llu bytes) at 0x%llx", format_bytes(a.size).c_str(),
              static_cast<unsigned long long>(a.size), static_cast<unsigned long long>(a.addr));
  if (a.event != kNoEvent) {
    const Event& e = doc.snapshot.events[a.event];
    ImGui::Text("requested  %llu bytes, block %llu bytes", static_cast<unsigned long long>(e.size),
                static_cast<unsigned long long>(e.block_size()));
  }
  ImGui::Text("on         %s, handle 0x%llx", stream_name(doc.snapshot, a.stream).c_str(),
              static_cast<unsigned long long>(a.stream < doc.snapshot.streams.size() ? doc.snapshot.streams[a.stream] : 0));
  ImGui::TextWrapped("site       %s", allocation_site(doc.snapshot, a.stack).c_str());
  if (std::string owner = owner_text(doc, state.selected_allocation); !owner.empty())
    ImGui::TextWrapped("owner      %s", owner.c_str());
  draw_life(doc, a);
  if (ImGui::CollapsingHeader("stack")) {
    auto frames = doc.snapshot.stacks[a.stack];
    if (frames.empty()) ImGui::TextDisabled("no stack recorded");
    // The unwinder's, recorder's and allocator's own frames are dimmed: the program's start at the first bright one.
    auto shown = top_frames(doc.snapshot, a.stack, SIZE_MAX);
    for (uint32_t f : frames) {
      std::string text = frame_label(doc.snapshot, f);
      if (std::find(shown.begin(), shown.end(), f) != shown.end()) ImGui::TextUnformatted(text.c_str());
      else ImGui::TextDisabled("%s", text.c_str());
    }
  }
  if (ImGui::CollapsingHeader("scopes", ImGuiTreeNodeFlags_DefaultOpen)) draw_scopes(doc, a);
  if (ImGui::CollapsingHeader("kernels while live")) draw_kernels(doc, a);
}

}  // namespace memrec::viewer
