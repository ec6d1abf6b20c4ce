// Hostile and malformed pickles: each must give one memrec::Error, never a crash, a hang or a big allocation.
// Nothing here is ever executed: the code-running pickles are plain byte strings.
#include <gtest/gtest.h>

#include <string>

#include "memrec/pickle.h"
#include "test_pickle_util.h"
#include "common/fixtures.h"

namespace memrec {
namespace {

std::vector<uint8_t> bytes(std::string_view s) { return {s.begin(), s.end()}; }

// Expects import_pickle(b) to throw Error whose message contains `fragment`.
void expect_error(const std::vector<uint8_t>& b, const std::string& fragment) {
  try {
    import_pickle(b);
    ADD_FAILURE() << "no error; expected one mentioning '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(PickleHostile, CodeOpcodesAreRejectedByName) {
  using namespace std::string_literals;
  // os.system('echo') the protocol 4 way and the protocol 2 way, as Python's pickle writes them.
  expect_error(bytes("\x80\x04\x8c\x02os\x8c\x06system\x93\x8c\x04""echo\x85R."s), "STACK_GLOBAL");
  expect_error(bytes("\x80\x02""cposix\nsystem\nq\x00X\x04\x00\x00\x00""echoq\x01\x85q\x02Rq\x03."s), "GLOBAL");
  expect_error(bytes("\x80\x04N)R."s), "REDUCE");
  expect_error(bytes("\x80\x04}}b."s), "BUILD");
  expect_error(bytes("\x80\x04(ios\nsystem\n."s), "INST");
  expect_error(bytes("\x80\x04(N)o."s), "OBJ");
  expect_error(bytes("\x80\x04N)\x81."s), "NEWOBJ");
  expect_error(bytes("\x80\x04N)}\x92."s), "NEWOBJ_EX");
  expect_error(bytes("\x80\x04P1\n."s), "PERSID");
  expect_error(bytes("\x80\x04NQ."s), "BINPERSID");
  expect_error(bytes("\x80\x04\x82\x01."s), "EXT1");
  expect_error(bytes("\x80\x04\x83\x01\x00."s), "EXT2");
  expect_error(bytes("\x80\x04\x84\x01\x00\x00\x00."s), "EXT4");
  expect_error(bytes("\x80\x05\x97."s), "NEXT_BUFFER");
  expect_error(bytes("\x80\x04\xff."s), "unsupported opcode 0xff");
  expect_error(bytes("\x80\x04I1\n."s), "unsupported opcode 0x49");  // protocol 0 INT
}

TEST(PickleHostile, ErrorsGiveTheByteOffset) {
  using namespace std::string_literals;
  expect_error(bytes("\x80\x04NNN)R."s), "byte 6");
}

TEST(PickleHostile, HugeDeclaredLengthsAreTruncationErrors) {
  using namespace std::string_literals;
  expect_error(bytes("\x80\x04X\xff\xff\xff\xff""abc."s), "truncated");                       // BINUNICODE
  expect_error(bytes("\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\xff""abc."s), "past the end");  // BINUNICODE8
  expect_error(bytes("\x80\x04""B\xff\xff\xff\x7f""abc."s), "truncated");                     // BINBYTES
  expect_error(bytes("\x80\x04\x8b\xff\xff\xff\x7f""abc."s), "truncated");                    // LONG4
  expect_error(bytes("\x80\x04\x8b\xff\xff\xff\xff""abc."s), "negative");                     // LONG4 < 0
  expect_error(bytes("\x80\x04\x95\xff\xff\xff\xff\xff\xff\xff\xff."s), "frame");              // FRAME
  expect_error(bytes("\x80\x04\x8a\x10\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01."s), "64 bits");
}

TEST(PickleHostile, InvalidUtf8IsRefused) {
  using namespace std::string_literals;
  expect_error(bytes("\x80\x04\x8c\x01\xff."s), "not valid UTF-8");
  expect_error(bytes("\x80\x04\x8c\x02\xc0\x80."s), "not valid UTF-8");  // overlong NUL
  expect_error(bytes("\x80\x04\x8c\x02\xe2\x82."s), "not valid UTF-8");  // cut short
}

TEST(PickleHostile, EveryTruncationIsAnError) {
  // A small but complete pickle: a fixture's first entries and segments, exported.
  Snapshot s = import_pickle_file(test::data("torch_2layer_python.pickle"));
  s.events.resize(12);
  s.segments_end.resize(2);
  std::vector<uint8_t> whole = export_pickle(s);
  ASSERT_NO_THROW(import_pickle(whole));
  for (size_t n = 0; n < whole.size(); ++n) {
    std::vector<uint8_t> prefix(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_THROW(import_pickle(prefix), Error) << "prefix of " << n << " bytes";
  }
}

TEST(PickleHostile, CorruptedBytesNeverCrash) {
  Snapshot s = import_pickle_file(test::data("torch_2layer_python.pickle"));
  s.events.resize(8);
  s.segments_end.resize(1);
  const std::vector<uint8_t> whole = export_pickle(s);
  size_t errors = 0;
  for (size_t i = 2; i < whole.size(); ++i) {
    for (uint8_t v : {uint8_t{0x00}, uint8_t{0xff}, uint8_t(whole[i] + 1), uint8_t{'h'}, uint8_t{'e'}}) {
      std::vector<uint8_t> b = whole;
      b[i] = v;
      try {
        import_pickle(b);
      } catch (const Error&) {
        ++errors;
      }
    }
  }
  EXPECT_GT(errors, 0u);  // the point is reaching here: every outcome was a result or an Error
}

TEST(PickleHostile, DeepNestingIsRefused) {
  const size_t n = 100000;
  std::vector<uint8_t> lists{0x80, 4};
  lists.insert(lists.end(), n, ']');
  lists.insert(lists.end(), n - 1, 'a');
  lists.push_back('.');
  expect_error(lists, "nested deeper");

  std::vector<uint8_t> tuples{0x80, 4, ')'};
  for (size_t i = 0; i < n; ++i) tuples.push_back(0x85);  // TUPLE1 of TUPLE1 of ...
  tuples.push_back('.');
  expect_error(tuples, "nested deeper");

  std::vector<uint8_t> marks{0x80, 4};
  marks.insert(marks.end(), n, '(');
  marks.push_back('.');
  expect_error(marks, "stack underflow");
}

TEST(PickleHostile, MemoAbuseIsRefused) {
  using namespace std::string_literals;
  expect_error(bytes("\x80\x04h\x05."s), "never set");                         // BINGET of an unset index
  expect_error(bytes("\x80\x04Nq\x00h\x01."s), "never set");
  expect_error(bytes("\x80\x04j\xff\xff\xff\xff."s), "never set");             // LONG_BINGET far away
  expect_error(bytes("\x80\x04Nr\xf0\xff\xff\xff."s), "out of range");         // LONG_BINPUT huge index
  expect_error(bytes("\x80\x04\x94."s), "stack underflow");                    // MEMOIZE of nothing
}

TEST(PickleHostile, ACyclicValueIsAnErrorNotARecursion) {
  using namespace std::string_literals;
  // {'segments': [], 'device_traces': [], 'allocator_settings': l} where l = [l].
  expect_error(bytes("\x80\x04}(\x8c\x08segments]\x8c\x0d""device_traces]\x8c\x12""allocator_settings"
                     "]q\x00h\x00""au."s),
               "nested too deeply");
}

TEST(PickleHostile, SharedValuesCannotExpandWithoutBound) {
  test::TempDir tmp;
  const std::vector<std::string> bombs = {
      // 2^60 leaves from 60 memoized lists
      "{'segments': [], 'device_traces': [],"
      " 'allocator_settings': __import__('functools').reduce(lambda a, _: [a, a], range(60), [0])}",
      // 10^8 blocks from one segment dict referenced 10^5 times
      "{'segments': [{'address': 1, 'blocks': [{'address': 1, 'size': 2, 'state': 'inactive'}] * 1000}] * 100000,"
      " 'device_traces': []}",
  };
  for (size_t i = 0; i < bombs.size(); ++i) {
    std::string p = tmp / fmt::format("bomb{}.pickle", i);
    test::python_pickle(bombs[i], p);
    expect_error(test::file_bytes(p), "expand beyond");
  }
}

TEST(PickleHostile, WrongProtocolsAreRefused) {
  using namespace std::string_literals;
  expect_error(bytes("\x80\x01}."s), "protocol 1");
  expect_error(bytes("\x80\x06}."s), "protocol 6");
  expect_error(bytes("}."s), "no PROTO");
  expect_error(bytes(""s), "no PROTO");
}

TEST(PickleHostile, StackAndMarkMisuseIsRefused) {
  using namespace std::string_literals;
  expect_error(bytes("\x80\x04]K\x01K\x02""e."s), "no MARK");         // APPENDS without MARK
  expect_error(bytes("\x80\x04(K\x01""e."s), "no container");         // MARK with nothing below
  expect_error(bytes("\x80\x04}(K\x01u."s), "odd number");            // SETITEMS with a lone key
  expect_error(bytes("\x80\x04}K\x01""a."s), "expected a list");      // APPEND to a dict
  expect_error(bytes("\x80\x04](K\x01""a."s), "stack underflow");     // APPEND reaching below a MARK
  expect_error(bytes("\x80\x04."s), "stack underflow");               // STOP with nothing
  expect_error(bytes("\x80\x04\x86."s), "stack underflow");           // TUPLE2 of nothing
  expect_error(bytes("\x80\x04}"s), "truncated");                     // no STOP
}

TEST(PickleHostile, TopLevelMustBeADict) {
  using namespace std::string_literals;
  expect_error(bytes("\x80\x04]."s), "top level: expected dict, got list");
  expect_error(bytes("\x80\x04N."s), "top level: expected dict, got None");
}

TEST(PickleHostile, WrongSchemaNamesThePath) {
  const std::string entry = "{'action': 'alloc', 'addr': 1, 'size': 2, 'stream': 0, 'time_us': 5, 'frames': []}";
  auto with_entry = [&](const std::string& override_) {
    return "{'segments': [], 'device_traces': [[" + entry + ", dict(" + entry + ", " + override_ + ")]]}";
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{'device_traces': []}", "top level: missing key 'segments'"},
      {"{'segments': []}", "top level: missing key 'device_traces'"},
      {"{'segments': {}, 'device_traces': []}", "segments: expected list, got dict"},
      {with_entry("size='big'"), "device_traces[0][1].size: expected int, got str"},
      {with_entry("size=-5"), "device_traces[0][1].size: expected a non-negative int"},
      {with_entry("action='teleport'"), "device_traces[0][1].action: unknown action 'teleport'"},
      {with_entry("frames=[{'name': 'f', 'filename': 'x.py', 'line': 'one'}]"),
       "device_traces[0][1].frames[0].line: expected int, got str"},
      {with_entry("frames=({'name': 'f'},)"), "device_traces[0][1].frames: expected list, got tuple"},
      {with_entry("time_us=1.5"), "device_traces[0][1].time_us: expected int, got float"},
      {with_entry("addr=2**70"), "does not fit 64 bits"},
      {"{'segments': [], 'device_traces': [[{'size': 1}]]}", "device_traces[0][0]: missing key 'action'"},
      // one memoized dict used as a frame, then as a frame list
      {"(lambda f: {'segments': [], 'device_traces': [[dict(" + entry + ", frames=[f]), dict(" + entry +
           ", frames=f)]]})({'name': 'a', 'filename': 'b', 'line': 1})",
       "device_traces[0][1].frames: expected list, got dict"},
      // a frame list that contains itself
      {"(lambda l: (l.append(l), {'segments': [], 'device_traces': [[dict(" + entry + ", frames=l)]]})[1])([])",
       "device_traces[0][0].frames[0]: expected dict, got list"},
      {"{'segments': [{'address': 1, 'segment_pool_id': (0, 0, 0), 'blocks': []}], 'device_traces': []}",
       "segments[0].segment_pool_id: expected 2 items, got 3"},
      {"{'segments': [{'address': 1, 'blocks': [{'state': 'gone'}]}], 'device_traces': []}",
       "segments[0].blocks[0].state: unknown block state 'gone'"},
      {"{'segments': [], 'device_traces': [], 'external_annotations': [{'stage': 'MIDDLE'}]}",
       "external_annotations[0].stage: expected 'START' or 'END'"},
      {"{'segments': [], 'device_traces': [], 1: 2}", "<key>: expected str, got int"},
  };
  test::TempDir tmp;
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string p = tmp / fmt::format("case{}.pickle", i);
    test::python_pickle(cases[i].first, p);
    expect_error(test::file_bytes(p), cases[i].second);
  }
}

}  // namespace
}  // namespace memrec
