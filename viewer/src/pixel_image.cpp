#include <GL/gl.h>

#include <algorithm>
#include <cstring>

#include "views.h"

namespace memrec::viewer {

PixelImage::~PixelImage() {
  if (texture_) glDeleteTextures(1, &texture_);
}

bool PixelImage::resize(int width, int height) {
  width = std::max(width, 1);
  height = std::max(height, 1);
  if (width == width_ && height == height_) return false;
  width_ = width;
  height_ = height;
  pixels_.assign(static_cast<size_t>(width) * height, 0);
  if (texture_) glDeleteTextures(1, &texture_);
  texture_ = 0;
  changed_ = true;
  return true;
}

void PixelImage::shift_left(int columns) {
  if (columns == 0 || std::abs(columns) >= width_) return;
  size_t keep = static_cast<size_t>(width_ - std::abs(columns));
  for (int y = 0; y < height_; ++y) {
    uint32_t* row = &at(0, y);
    if (columns > 0) std::memmove(row, row + columns, keep * sizeof(uint32_t));
    else std::memmove(row - columns, row, keep * sizeof(uint32_t));
  }
  changed_ = true;
}

void PixelImage::draw(ImDrawList* list, ImVec2 top_left) {
  if (!texture_) {
    glGenTextures(1, &texture_);
    glBindTexture(GL_TEXTURE_2D, texture_);
    // Nearest sampling: every texel lands on one screen pixel with its exact color.
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA, width_, height_, 0, GL_RGBA, GL_UNSIGNED_BYTE, pixels_.data());
    changed_ = false;
  } else if (changed_) {
    glBindTexture(GL_TEXTURE_2D, texture_);
    glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
    glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, width_, height_, GL_RGBA, GL_UNSIGNED_BYTE, pixels_.data());
    changed_ = false;
  }
  ImVec2 p(std::floor(top_left.x), std::floor(top_left.y));
  list->AddImage(reinterpret_cast<ImTextureID>(static_cast<intptr_t>(texture_)), p,
                 ImVec2(p.x + width_, p.y + height_));
}

}  // namespace memrec::viewer
