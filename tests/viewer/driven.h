// The viewer driven like a user, for the interaction tests: mouse and keys fed through ImGuiIO into a real window
// (off-screen), re-run under xvfb-run when there is no display.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <string>

#include "../../viewer/src/app.h"
#include "common/process.h"
#include "common/xvfb.h"
#include "common/fixtures.h"

namespace memrec::test {

using viewer::App;

struct Mouse {
  ImVec2 pos{-1, -1};
  bool down = false;
  float wheel = 0;
  int key = -1;  // held this frame
};

class Driven {
 public:
  explicit Driven(const std::string& fixture) : Driven(test::data(fixture), true) {}
  Driven(const std::string& path, bool) : app_(path, std::nullopt, 1280, 720, true) {
    input_ = [this](ImGuiIO& io) {
      io.MousePos = mouse_.pos;
      io.MouseDown[0] = mouse_.down;
      io.MouseWheel = mouse_.wheel;
      mouse_.wheel = 0;
      for (bool& k : io.KeysDown) k = false;
      if (mouse_.key >= 0) io.KeysDown[mouse_.key] = true;
    };
    app_.input = input_;
    for (int i = 0; i < 3; ++i) app_.frame();  // layout settles
  }
  App& app() { return app_; }
  const viewer::ColumnGrid& grid() { return app_.timeline().grid(); }
  void frames(int n) {
    for (int i = 0; i < n; ++i) app_.frame();
  }
  void click(ImVec2 p) {
    mouse_.pos = p;
    frames(1);
    mouse_.down = true;
    frames(1);
    mouse_.down = false;
    frames(1);
  }
  void drag(ImVec2 from, ImVec2 to) {
    mouse_.pos = from;
    frames(1);
    mouse_.down = true;
    frames(1);
    for (int i = 1; i <= 10; ++i) {
      mouse_.pos = ImVec2(from.x + (to.x - from.x) * i / 10, from.y + (to.y - from.y) * i / 10);
      frames(1);
    }
    mouse_.down = false;
    frames(1);
  }
  void wheel(ImVec2 p, float notches) {
    mouse_.pos = p;
    mouse_.wheel = notches;
    frames(1);
  }
  void type(const std::string& text) {
    app_.input = [this, text, sent = false](ImGuiIO& io) mutable {
      io.MousePos = mouse_.pos;
      io.MouseDown[0] = mouse_.down;
      if (!sent) {
        for (char c : text) io.AddInputCharacter(static_cast<unsigned char>(c));
        sent = true;
      }
    };
    frames(1);
    app_.input = input_;
  }
  void hold(int key, int n) {
    mouse_.pos = ImVec2(-1, -1);
    mouse_.key = key;
    frames(n);
    mouse_.key = -1;
    frames(1);
  }

 private:
  App app_;
  Mouse mouse_;
  std::function<void(ImGuiIO&)> input_;
};

}  // namespace memrec::test
