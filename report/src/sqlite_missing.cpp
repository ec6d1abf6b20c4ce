// export_sqlite_file where SQLite's headers were missing at build time: the format says so instead of pretending.
#include "memrec/sqlite_export.h"

namespace memrec {

void export_sqlite_file(const Snapshot&, const std::string& path) {
  throw Error("cannot write " + path + ": this memrec was built without SQLite (install libsqlite3-dev and rebuild)");
}

}  // namespace memrec
