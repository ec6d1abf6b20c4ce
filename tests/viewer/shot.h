// Screenshots for the viewer tests: `memrec view --screenshot` run under its own X server, the PNG read back and
// the JSON layout line it printed parsed.
#pragma once

#include <stb/stb_image.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/process.h"
#include "common/fixtures.h"

namespace memrec::test {

struct Image {
  int width = 0, height = 0;
  std::vector<uint32_t> pixels;  // ABGR as ImGui packs colors
  uint32_t at(int x, int y) const { return pixels[static_cast<size_t>(y) * width + x]; }
};

inline Image load_png(const std::string& path) {
  Image img;
  int channels = 0;
  std::unique_ptr<unsigned char, void (*)(void*)> data(stbi_load(path.c_str(), &img.width, &img.height, &channels, 4),
                                                       stbi_image_free);
  if (!data) return img;
  img.pixels.resize(static_cast<size_t>(img.width) * img.height);
  std::memcpy(img.pixels.data(), data.get(), img.pixels.size() * 4);
  return img;
}

struct Shot {
  nlohmann::json layout;
  Image image;
  std::string output;
};

// The test starts its own X server: ctest runs plainly in CI.
inline Shot screenshot(const std::string& fixture, const std::string& extra, const test::TempDir& dir) {
  std::string png = dir / "shot.png";
  auto r = test::run_command("xvfb-run -a " + quote(MEMREC_BINARY) + " view " + quote(fixture) + " --screenshot " +
                       quote(png) + " " + extra);
  Shot shot{{}, {}, r.output};
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with("{")) shot.layout = nlohmann::json::parse(line);
  shot.image = load_png(png);
  return shot;
}

// Where the layout line says bytes and times are drawn on the timeline.
struct Plot {
  int x, y, w, h;
  double t0, dt, per_row;
  explicit Plot(const nlohmann::json& L)
      : x(L["plot"]["x"].get<int>()), y(L["plot"]["y"].get<int>()), w(L["plot"]["w"].get<int>()),
        h(L["plot"]["h"].get<int>()), t0(L["t0_ns"].get<double>()), dt(L["dt_ns"].get<double>()),
        per_row(L["bytes_per_row"].get<double>()) {}
  int column(int64_t ns) const { return static_cast<int>(std::floor((static_cast<double>(ns) - t0) / dt)); }
  int row(uint64_t bytes) const { return std::min(static_cast<int>(static_cast<double>(bytes) / per_row), h - 1); }
  uint32_t pixel(const Image& img, int col, int row) const { return img.at(x + col, y + h - 1 - row); }
};

// scripts/screenshots.sh sets MEMREC_SCREENSHOT_DIR: the README's pictures are the ones these tests checked.
inline void keep_for_readme(const test::TempDir& dir, const std::string& name) {
  const char* out = std::getenv("MEMREC_SCREENSHOT_DIR");
  if (!out || ::testing::Test::HasFailure()) return;
  std::filesystem::copy_file(dir / "shot.png", std::filesystem::path(out) / name,
                             std::filesystem::copy_options::overwrite_existing);
}

}  // namespace memrec::test
