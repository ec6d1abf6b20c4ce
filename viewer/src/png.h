// Reading the frame back and writing it as PNG (stb_image_write from Debian's libstb).
#pragma once

#include <string>

namespace memrec::viewer {

// Writes the bound framebuffer's (width x height pixels) to `path`; throws memrec::Error on failure.
void save_framebuffer_png(const std::string& path, int width, int height);

}  // namespace memrec::viewer
