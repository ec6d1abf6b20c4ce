#include "sqlite.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace memrec::sql {

Database::Database(const std::string& path) : path_(path) {
  if (std::filesystem::exists(path)) throw Error(fmt::format("cannot write {}: it exists already", path));
  int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  check(rc);
  // One transaction writes the whole file, which is renamed into place only once complete: no journal needed.
  exec("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; BEGIN");
}

Database::~Database() { sqlite3_close(db_); }

void Database::exec(const std::string& sql) { check(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr)); }

void Database::check(int rc) {
  if (rc == SQLITE_OK || rc == SQLITE_ROW || rc == SQLITE_DONE) return;
  const char* what = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  // SQLite keeps the system's reason for a failed write only until it rolls back (a failed COMMIT loses it), while
  // errno still holds it then.
  bool io = (rc & 0xff) == SQLITE_IOERR || (rc & 0xff) == SQLITE_FULL;
  int system = !io ? 0 : db_ && sqlite3_system_errno(db_) ? sqlite3_system_errno(db_) : errno;
  if (system) throw Error(fmt::format("cannot write {}: {} ({})", path_, std::strerror(system), what));
  throw Error(fmt::format("cannot write {}: {}", path_, what));
}

Statement::Statement(Database& db, const std::string& sql) : db_(db) {
  db_.check(sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &stmt_, nullptr));
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::bind_integer(int64_t v) {
  db_.check(sqlite3_bind_int64(stmt_, ++column_, v));
  return *this;
}

Statement& Statement::operator<<(std::string_view v) {
  db_.check(sqlite3_bind_text(stmt_, ++column_, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
  return *this;
}

Statement& Statement::operator<<(std::nullopt_t) {
  db_.check(sqlite3_bind_null(stmt_, ++column_));
  return *this;
}

void Statement::insert() {
  db_.check(sqlite3_step(stmt_));
  db_.check(sqlite3_reset(stmt_));
  column_ = 0;
}

}  // namespace memrec::sql
