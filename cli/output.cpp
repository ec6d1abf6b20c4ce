#include "output.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include <fmt/core.h>

#include "memrec/perfetto.h"
#include "memrec/pickle.h"
#include "memrec/snapshot.h"
#include "memrec/sqlite_export.h"

namespace memrec::cli {
namespace {

namespace fs = std::filesystem;

struct FileId {
  dev_t dev;
  ino_t ino;
  bool operator==(const FileId&) const = default;
};

std::optional<FileId> file_id(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId{st.st_dev, st.st_ino};
}

bool same_file(const std::string& a, const std::string& b) {
  auto ia = file_id(a), ib = file_id(b);
  if (ia && ib) return *ia == *ib;
  std::error_code ec;
  // absolute() first: weakly_canonical leaves a relative path whose first part does not exist as it is, so
  // "run.memrec" and "./run.memrec" would differ.
  return !ia && !ib && fs::weakly_canonical(fs::absolute(a, ec), ec) == fs::weakly_canonical(fs::absolute(b, ec), ec);
}

// Creating a file is the only test that holds for root, read-only mounts and ACLs alike.
bool can_create_in(const fs::path& dir) {
  std::string probe = (dir / ".memrec-probe-XXXXXX").string();
  int fd = mkstemp(probe.data());
  if (fd < 0) return false;
  close(fd);
  unlink(probe.c_str());
  return true;
}

void check_folder(const Output& o) {
  std::error_code ec;
  if (fs::is_directory(o.path, ec))
    throw Error(fmt::format("cannot write {} ({}): it is a directory; give a file name", o.path, o.flag));
  fs::path dir = fs::path(o.path).parent_path();
  fs::file_status st = fs::status(dir.empty() ? "." : dir, ec);
  if (!fs::exists(st)) throw Error(fmt::format("cannot write {} ({}): folder {} does not exist", o.path, o.flag, dir.string()));
  if (!fs::is_directory(st)) throw Error(fmt::format("cannot write {} ({}): {} is not a folder", o.path, o.flag, dir.string()));
  if (!can_create_in(dir.empty() ? "." : dir))
    throw Error(fmt::format("cannot write {} ({}): folder {} is not writable ({})", o.path, o.flag,
                            dir.empty() ? "." : dir.string(), std::strerror(errno)));
}

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

}  // namespace

std::string export_format(const std::string& out, const std::string& format) {
  if (!format.empty()) return format;
  std::string ext = fs::path(out).extension().string();
  if (ext == ".json") return "perfetto";
  if (ext == ".pickle" || ext == ".pkl") return "pickle";
  if (ext == ".db" || ext == ".sqlite" || ext == ".sqlite3") return "sqlite";
  throw Error(fmt::format("-o {}: give --format pickle|perfetto|sqlite, or an output ending in .pickle, .pkl "
                          "(memory_viz), .json (Perfetto) or .db, .sqlite (SQLite)", out));
}

void export_file(const Snapshot& s, const std::string& format, const std::string& out) {
  write_output(out, [&](const std::string& path) {
    if (format == "perfetto") export_perfetto_file(s, path);
    else if (format == "sqlite") export_sqlite_file(s, path);
    else export_pickle_file(s, path);
  });
}

void check_outputs(const std::vector<std::string>& inputs, const std::vector<Output>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Output& o = outputs[i];
    if (o.path.empty()) continue;
    for (const std::string& in : inputs)
      if (!in.empty() && same_file(in, o.path))
        throw Error(fmt::format("{} {} is the input {}: refusing to overwrite it", o.flag, o.path, in));
    for (size_t j = 0; j < i; ++j)
      if (!outputs[j].path.empty() && same_file(outputs[j].path, o.path))
        throw Error(fmt::format("{} and {} name the same file ({}): give each its own", outputs[j].flag, o.flag, o.path));
    check_folder(o);
  }
}

void write_output(const std::string& out, const std::function<void(const std::string& path)>& write) {
  std::error_code ec;
  fs::file_status st = fs::status(out, ec);
  if (fs::is_directory(st)) throw Error(fmt::format("cannot write {}: it is a directory", out));
  if (fs::exists(st) && !fs::is_regular_file(st)) return write(out);
  std::string partial = fmt::format("{}.partial-{}", out, getpid());
  try {
    write(partial);
    fs::rename(partial, out);
  } catch (const fs::filesystem_error& e) {
    fs::remove(partial, ec);
    throw Error(fmt::format("cannot write {}: {}", out, e.code().message()));
  } catch (const Error& e) {
    fs::remove(partial, ec);
    std::string message = e.what();
    replace_all(message, partial, out);
    throw Error(message);
  } catch (...) {
    fs::remove(partial, ec);
    throw;
  }
}

}  // namespace memrec::cli
