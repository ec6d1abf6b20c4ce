#include "png.h"

#include <GL/gl.h>
#include <stb_image_write.h>

#include <cstdint>
#include <vector>

#include "memrec/snapshot.h"

namespace memrec::viewer {

void save_framebuffer_png(const std::string& path, int width, int height) {
  std::vector<uint8_t> pixels(static_cast<size_t>(width) * height * 4);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
  for (size_t i = 3; i < pixels.size(); i += 4) pixels[i] = 255;  // the window's alpha is not the picture's
  // OpenGL's rows start at the bottom; PNG's at the top.
  stbi_flip_vertically_on_write(1);
  if (!stbi_write_png(path.c_str(), width, height, 4, pixels.data(), width * 4))
    throw Error("cannot write " + path);
}

}  // namespace memrec::viewer
