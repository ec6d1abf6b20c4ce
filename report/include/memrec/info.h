// `memrec info`: what a file holds, per device.
#pragma once

#include <string>

#include "memrec/snapshot.h"

namespace memrec {

std::string info_report(const Snapshot& s);

}  // namespace memrec
