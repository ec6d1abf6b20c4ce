// `memrec advise`: the ranked changes as JSON for scripts and as text for people, from memrec/advise.h's result.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "memrec/advise.h"

namespace memrec {

// {"peak": {"allocated", "reserved"}, "advice": [{"kind", "change", "method", "saves": {"allocated", "reserved"},
// "peak_after": {"allocated", "reserved"}, "cost", "evidence": [{"what", "bytes"}], "layers", "settings"}],
// "not_assessed": [...], "device", "warnings"}; reserved is null on a CPU and for a counted change, cost null
// without traced kernels (else {"recompute_ns"}).
nlohmann::json advise_json(const Advise& a);

// One numbered block per change (the sentence, saving, peaks after, method, cost, evidence), then what was not
// assessed.
std::string advise_text(const Advise& a);

// The report's first section, "What to change": one row per change with its saving, peaks after and method, its
// evidence under it, then what was not assessed.
std::string advise_html(const Advise& a);

// "3 MiB allocated, 4 MiB reserved" (reserved where set), for the viewer's advice tab as for the text.
std::string peaks_text(const PeakBytes& p);
// The same of a saving, with a minus sign where the change costs memory.
std::string saves_text(const SavedBytes& s);

}  // namespace memrec
