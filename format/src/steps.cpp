#include "memrec/steps.h"

#include "payload.h"

namespace memrec {

std::optional<uint64_t> step_scope_number(std::string_view name) { return format_detail::step_number(name); }

}  // namespace memrec
