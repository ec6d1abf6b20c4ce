#include "pickle_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

#include "memrec/snapshot.h"

namespace memrec::pickle {

std::string_view to_string(Kind k) {
  static constexpr std::array<std::string_view, 10> names = {
      "None", "bool", "int", "int", "float", "str", "bytes", "list", "tuple", "dict"};
  return names.at(static_cast<size_t>(k));
}

namespace {

constexpr uint32_t kUnset = UINT32_MAX;

// Opcodes that would import, construct or call something. Named in the error so the user knows why.
std::string_view code_opcode_name(uint8_t op) {
  switch (op) {
    case 'c': return "GLOBAL";
    case 0x93: return "STACK_GLOBAL";
    case 'R': return "REDUCE";
    case 'b': return "BUILD";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return {};
  }
}

// Python refuses str values that are not UTF-8; so do we, so that every string we keep is valid text.
bool valid_utf8(const uint8_t* p, size_t n) {
  size_t i = 0;
  while (i < n) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    size_t len = (p[i] & 0xe0) == 0xc0 ? 2 : (p[i] & 0xf0) == 0xe0 ? 3 : (p[i] & 0xf8) == 0xf0 ? 4 : 0;
    if (len == 0 || n - i < len) return false;
    uint32_t cp = p[i] & (0x7f >> len);
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

class Parser {
 public:
  explicit Parser(std::span<const uint8_t> in) : in_(in) {
    check_start(in, in.size());
    tree_.input = in;
    // Every node, item and chunk costs at least one input byte, so these bounds are proportional to the input.
    // Reserving what a snapshot pickle typically needs (about 1 node per 10 bytes, 1 item per 3) avoids
    // regrowth copies; pages no value reaches are never touched.
    tree_.nodes.reserve(in.size() / 8 + 16);
    tree_.items.reserve(in.size() / 3 + 16);
    tree_.chunks.reserve(in.size() / 32 + 16);
    advise_huge_pages(tree_.nodes);
    advise_huge_pages(tree_.items);
    advise_huge_pages(tree_.chunks);
  }

  Tree run() {
    for (;;) {
      op_at_ = pos_;
      if (step()) break;
    }
    return std::move(tree_);
  }

 private:
  std::span<const uint8_t> in_;
  size_t pos_ = 0;
  size_t op_at_ = 0;
  Tree tree_;
  std::vector<uint32_t> stack_;
  std::vector<uint32_t> marks_;  // stack sizes at each MARK
  std::vector<uint32_t> memo_;
  uint32_t memo_count_ = 0;

  [[noreturn]] void fail(std::string_view what) const {
    throw Error(fmt::format("pickle: {} (opcode at byte {})", what, op_at_));
  }

  const uint8_t* take(size_t n) {
    if (n > in_.size() - pos_) fail(fmt::format("truncated: needs {} more bytes, {} left", n, in_.size() - pos_));
    const uint8_t* p = in_.data() + pos_;
    pos_ += n;
    return p;
  }
  template <typename T>
  T read_le() {
    T v;
    std::memcpy(&v, take(sizeof(T)), sizeof(T));
    return v;  // pickle is little-endian, as is every machine we build for
  }

  uint32_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  uint32_t pop() {
    if (stack_.size() <= floor()) fail("stack underflow");
    uint32_t v = stack_.back();
    stack_.pop_back();
    return v;
  }
  uint32_t top() const {
    if (stack_.size() <= floor()) fail("stack underflow");
    return stack_.back();
  }
  // Ends the innermost MARK; returns where its items start on the stack.
  uint32_t pop_mark() {
    if (marks_.empty()) fail("no MARK for this opcode");
    uint32_t m = marks_.back();
    marks_.pop_back();
    return m;
  }

  void push_node(const Node& n) {
    stack_.push_back(static_cast<uint32_t>(tree_.nodes.size()));
    tree_.nodes.push_back(n);
  }
  void push_scalar(Kind k, int64_t v) {
    Node n;
    n.kind = k;
    n.i = v;
    push_node(n);
  }
  void push_text(Kind k, size_t len) {
    Node n;
    n.kind = k;
    n.count = static_cast<uint32_t>(len);
    n.ref.first = static_cast<uint32_t>(pos_);
    const uint8_t* p = take(len);
    if (k == Kind::string && !valid_utf8(p, len)) fail("string is not valid UTF-8");
    push_node(n);
  }
  uint32_t new_container(Kind k) {
    Node n;
    n.kind = k;
    n.depth = 1;
    n.ref.first = n.ref.last = kNoChunk;
    tree_.nodes.push_back(n);
    return static_cast<uint32_t>(tree_.nodes.size() - 1);
  }
  void push_container(Kind k) { stack_.push_back(new_container(k)); }

  // Appends stack_[from, end) to container `c` as one chunk and drops them from the stack.
  void add_items(uint32_t c, size_t from) {
    size_t n = stack_.size() - from;
    if (n == 0) return;
    Node& node = tree_.nodes[c];
    uint16_t depth = node.depth;
    for (size_t k = from; k < stack_.size(); ++k)
      depth = std::max<uint16_t>(depth, tree_.nodes[stack_[k]].depth + 1);
    if (depth > kMaxDepth) fail(fmt::format("values nested deeper than {}", kMaxDepth));
    node.depth = depth;
    auto chunk = static_cast<uint32_t>(tree_.chunks.size());
    tree_.chunks.push_back({static_cast<uint32_t>(tree_.items.size()), static_cast<uint32_t>(n), kNoChunk});
    tree_.items.insert(tree_.items.end(), stack_.begin() + from, stack_.end());
    stack_.resize(from);
    if (node.ref.first == kNoChunk)
      node.ref.first = chunk;
    else
      tree_.chunks[node.ref.last].next = chunk;
    node.ref.last = chunk;
    node.count += static_cast<uint32_t>(n);
  }

  // APPENDS, SETITEMS, ADDITEMS: the items since the last MARK go into the container below that MARK.
  void extend(Kind want) {
    uint32_t m = pop_mark();
    if (m == 0 || m <= floor()) fail("no container below the MARK");
    uint32_t c = stack_[m - 1];
    check_target(c, want);
    if (want == Kind::dict && (stack_.size() - m) % 2 != 0) fail("odd number of items for a dict");
    add_items(c, m);
  }
  // APPEND, SETITEM: the last `n` values go into the container below them.
  void add_last(size_t n, Kind want) {
    if (stack_.size() < floor() + n + 1) fail("stack underflow");
    uint32_t c = stack_[stack_.size() - n - 1];
    check_target(c, want);
    add_items(c, stack_.size() - n);
  }
  void check_target(uint32_t c, Kind want) const {
    if (tree_.nodes[c].kind != want)
      fail(fmt::format("adds items to a {}, expected a {}", to_string(tree_.nodes[c].kind), to_string(want)));
  }
  // TUPLE1-3, TUPLE, LIST, DICT, FROZENSET: a new container from the values from `from` on.
  void build(Kind k, size_t from) {
    if (k == Kind::dict && (stack_.size() - from) % 2 != 0) fail("odd number of items for a dict");
    uint32_t c = new_container(k);
    add_items(c, from);
    stack_.push_back(c);
  }
  void build_last(Kind k, size_t n) {
    if (stack_.size() < floor() + n) fail("stack underflow");
    build(k, stack_.size() - n);
  }

  // Two's complement little-endian integers of LONG1/LONG4; wider than 64 bits is refused.
  void push_long(size_t n) {
    const uint8_t* p = take(n);
    bool negative = n > 0 && (p[n - 1] & 0x80);
    size_t significant = n;
    // Bytes beyond the eighth must only carry the sign (Python writes a 0 byte for values >= 2^63).
    while (significant > 8 && p[significant - 1] == (negative ? 0xff : 0x00)) --significant;
    if (significant > 8) fail(fmt::format("integer of {} bytes does not fit 64 bits", n));
    uint64_t u = negative ? ~uint64_t{0} : 0;
    for (size_t k = 0; k < significant; ++k) {
      u &= ~(uint64_t{0xff} << (8 * k));
      u |= uint64_t{p[k]} << (8 * k);
    }
    if (!negative && (u >> 63)) {
      Node node;
      node.kind = Kind::uinteger;
      node.u = u;
      push_node(node);
    } else {
      push_scalar(Kind::integer, static_cast<int64_t>(u));
    }
  }

  void memo_put(uint64_t index) {
    if (index >= in_.size()) fail(fmt::format("memo index {} out of range", index));
    uint32_t v = top();
    if (index >= memo_.size()) memo_.resize(index + 1, kUnset);
    if (memo_[index] == kUnset) ++memo_count_;
    memo_[index] = v;
  }
  void memo_get(uint64_t index) {
    if (index >= memo_.size() || memo_[index] == kUnset) fail(fmt::format("memo index {} was never set", index));
    stack_.push_back(memo_[index]);
  }

  // Executes one opcode; true at STOP.
  bool step() {
    uint8_t op = *take(1);
    switch (op) {
      case 0x80: {  // PROTO
        uint8_t v = *take(1);
        if (v < 2 || v > 5) fail(fmt::format("protocol {} is not supported (2-5 are)", v));
        return false;
      }
      case 0x95: {  // FRAME: framing only helps buffered readers; check the length and go on
        uint64_t n = read_le<uint64_t>();
        if (n > in_.size() - pos_) fail("frame runs past the end of the input");
        return false;
      }
      case '.':  // STOP
        tree_.root = pop();
        return true;
      case '(': marks_.push_back(static_cast<uint32_t>(stack_.size())); return false;
      case '0': pop(); return false;  // POP
      case '1': stack_.resize(pop_mark()); return false;  // POP_MARK
      case 'N': push_scalar(Kind::none, 0); return false;
      case 0x88: push_scalar(Kind::boolean, 1); return false;
      case 0x89: push_scalar(Kind::boolean, 0); return false;
      case 'J': push_scalar(Kind::integer, read_le<int32_t>()); return false;
      case 'K': push_scalar(Kind::integer, read_le<uint8_t>()); return false;
      case 'M': push_scalar(Kind::integer, read_le<uint16_t>()); return false;
      case 0x8a: push_long(*take(1)); return false;  // LONG1
      case 0x8b: {  // LONG4
        int32_t n = read_le<int32_t>();
        if (n < 0) fail("negative LONG4 length");
        push_long(static_cast<size_t>(n));
        return false;
      }
      case 'G': {  // BINFLOAT, big-endian
        uint64_t bits = __builtin_bswap64(read_le<uint64_t>());
        Node n;
        n.kind = Kind::floating;
        n.f = std::bit_cast<double>(bits);
        push_node(n);
        return false;
      }
      case 0x8c: push_text(Kind::string, *take(1)); return false;             // SHORT_BINUNICODE
      case 'X': push_text(Kind::string, read_le<uint32_t>()); return false;   // BINUNICODE
      case 0x8d: push_text(Kind::string, read_length8()); return false;       // BINUNICODE8
      case 'C': push_text(Kind::bytes, *take(1)); return false;               // SHORT_BINBYTES
      case 'B': push_text(Kind::bytes, read_le<uint32_t>()); return false;    // BINBYTES
      case 0x8e: case 0x96: push_text(Kind::bytes, read_length8()); return false;  // BINBYTES8, BYTEARRAY8
      case ']': case 0x8f: push_container(Kind::list); return false;          // EMPTY_LIST, EMPTY_SET
      case ')': push_container(Kind::tuple); return false;
      case '}': push_container(Kind::dict); return false;
      case 'a': add_last(1, Kind::list); return false;                        // APPEND
      case 's': add_last(2, Kind::dict); return false;                        // SETITEM
      case 'e': case 0x90: extend(Kind::list); return false;                  // APPENDS, ADDITEMS
      case 'u': extend(Kind::dict); return false;                             // SETITEMS
      case 0x85: build_last(Kind::tuple, 1); return false;
      case 0x86: build_last(Kind::tuple, 2); return false;
      case 0x87: build_last(Kind::tuple, 3); return false;
      case 't': build(Kind::tuple, pop_mark()); return false;
      case 'l': case 0x91: build(Kind::list, pop_mark()); return false;       // LIST, FROZENSET
      case 'd': build(Kind::dict, pop_mark()); return false;
      case 'q': memo_put(*take(1)); return false;                             // BINPUT
      case 'r': memo_put(read_le<uint32_t>()); return false;                  // LONG_BINPUT
      case 0x94: memo_put(memo_count_); return false;                         // MEMOIZE
      case 'h': memo_get(*take(1)); return false;                             // BINGET
      case 'j': memo_get(read_le<uint32_t>()); return false;                  // LONG_BINGET
      default: break;
    }
    if (auto name = code_opcode_name(op); !name.empty())
      fail(fmt::format("opcode {} would import or call code; only plain data is accepted", name));
    fail(fmt::format("unsupported opcode 0x{:02x}", op));
  }

  size_t read_length8() {
    uint64_t n = read_le<uint64_t>();
    if (n > in_.size() - pos_) fail(fmt::format("length {} runs past the end of the input", n));
    return static_cast<size_t>(n);
  }
};

}  // namespace

Tree parse(std::span<const uint8_t> bytes) { return Parser(bytes).run(); }

void check_start(std::span<const uint8_t> head, uint64_t size) {
  if (head.size() < 2 || head[0] != 0x80) throw Error("pickle: not a pickle of protocol 2-5 (no PROTO opcode at byte 0)");
  if (head[1] < 2 || head[1] > 5) throw Error(fmt::format("pickle: protocol {} is not supported (2-5 are)", head[1]));
  if (size >= UINT32_MAX) throw Error("pickle: larger than 4 GiB");  // offsets and ids are 32-bit
}

}  // namespace memrec::pickle
