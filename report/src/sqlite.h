// A thin owner of an SQLite database and its prepared statements: every failure throws memrec::Error naming the
// file and, where the system said why (a full disk), the system's reason.
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <sqlite3.h>

#include "memrec/snapshot.h"

namespace memrec::sql {

class Database;

// One prepared statement, bound a row at a time: bind the columns in order, then insert().
class Statement {
 public:
  Statement(Database& db, const std::string& sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Integers as SQLite's 64-bit INTEGER (an unsigned value past 2^63 wraps, as no address or size does).
  template <std::integral T> Statement& operator<<(T v) { return bind_integer(static_cast<int64_t>(v)); }
  Statement& operator<<(std::string_view v);
  Statement& operator<<(std::nullopt_t);
  template <class T> Statement& operator<<(const std::optional<T>& v) { return v ? *this << *v : *this << std::nullopt; }
  // Runs the statement with the values bound, then clears them for the next row.
  void insert();

 private:
  Statement& bind_integer(int64_t v);
  Database& db_;
  sqlite3_stmt* stmt_ = nullptr;
  int column_ = 0;
};

class Database {
 public:
  // Creates the file; it must not exist yet (an export writes a fresh temporary file).
  explicit Database(const std::string& path);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  void exec(const std::string& sql);
  // Throws Error for a result code other than SQLITE_OK, SQLITE_ROW or SQLITE_DONE.
  void check(int rc);
  sqlite3* handle() { return db_; }

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
};

}  // namespace memrec::sql
