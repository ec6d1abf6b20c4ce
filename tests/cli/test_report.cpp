// memrec report: the HTML page of real PyTorch pickles and of a recorded CPU run, opened in headless Chromium.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/process.h"
#include "memrec/report.h"
#include "memrec/stats.h"
#include "memrec/timeline_svg.h"
#include "memrec/units.h"
#include "common/fixtures.h"
#include "common/histories.h"
#include "common/report_page.h"

namespace memrec {
namespace {

using nlohmann::json;
using test::quote;
using test::run_command;
using test::TempDir;

const std::string kAll = test::data("torch_2layer_all.pickle");
const std::string kPython = test::data("torch_2layer_python.pickle");
constexpr std::string_view kPngSignature = "\x89PNG\r\n\x1a\n";

using test::memrec;
using test::base64_decode;
using test::embedded;

json json_of(const std::string& args) {
  auto r = memrec(args + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return json::parse(r.output);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

bool viewer_built() { return memrec("--help").output.find("(unavailable: the viewer") == std::string::npos; }

// Width and height from the PNG header (IHDR, big-endian, right after the signature).
std::pair<uint32_t, uint32_t> png_size(const std::string& png) {
  auto be32 = [&](size_t at) {
    uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i) v = (v << 8) | uint8_t(png.at(at + i));
    return v;
  };
  return {be32(16), be32(20)};
}

// What headless Chromium made of the page: the serialized DOM and its log.
struct Page {
  std::string dom, log;
};

Page open_in_chromium(const std::string& html, const TempDir& dir) {
  auto r = run_command("chromium --headless --disable-gpu --no-sandbox --enable-logging=stderr --v=0 --user-data-dir=" +
                       quote(dir / "profile") + " --dump-dom " + quote("file://" + html) + " >" + quote(dir / "dom.html") +
                       " 2>" + quote(dir / "chromium.log"));
  EXPECT_EQ(r.exit_code, 0) << read_file(dir / "chromium.log");
  return {read_file(dir / "dom.html"), read_file(dir / "chromium.log")};
}

void expect_no_console_errors(const Page& page) {
  EXPECT_EQ(page.log.find("Uncaught"), std::string::npos) << page.log;
  EXPECT_EQ(page.log.find("ERROR:CONSOLE"), std::string::npos) << page.log;
}

// The text of the first element with class `cls` after `id="<id>"`.
std::string text_after(const std::string& dom, const std::string& id, const std::string& cls) {
  size_t at = dom.find("id=\"" + id + "\"");
  if (at == std::string::npos) return "<no " + id + ">";
  at = dom.find("class=\"" + cls + "\">", at);
  if (at == std::string::npos) return "<no " + cls + ">";
  at = dom.find('>', at) + 1;
  return dom.substr(at, dom.find('<', at) - at);
}

// Table rows of class `cls`, each as its HTML.
std::vector<std::string> rows_of(const std::string& dom, const std::string& cls) {
  std::vector<std::string> rows;
  const std::string open = "<tr class=\"" + cls + "\">";
  for (size_t at = dom.find(open); at != std::string::npos; at = dom.find(open, at + 1))
    rows.push_back(dom.substr(at, dom.find("</tr>", at) - at));
  return rows;
}

// The row whose first cell is `key`, or "".
std::string row_with_key(const std::vector<std::string>& rows, const std::string& key) {
  for (const auto& r : rows)
    if (r.find("<td class=\"key\">" + html_escape(key) + "</td>") != std::string::npos) return r;
  return "";
}

void expect_peaks(const std::string& dom, const json& stats) {
  EXPECT_EQ(text_after(dom, "peak-allocated", "value"), format_bytes(stats["peak_allocated"]["bytes"]));
  EXPECT_EQ(text_after(dom, "peak-reserved", "value"), format_bytes(stats["peak_reserved"]["bytes"]));
}

void expect_timeline_picture(const std::string& html) {
  if (!viewer_built()) {
    EXPECT_TRUE(embedded(html, "image/svg+xml").starts_with("<svg ")) << "no drawn timeline in the page";
    return;
  }
  std::string png = embedded(html, "image/png");
  ASSERT_TRUE(png.starts_with(kPngSignature)) << "no PNG in the page";
  EXPECT_EQ(png_size(png), std::make_pair(1600u, 700u));
}

TEST(Report, EscapesAndEncodes) {
  EXPECT_EQ(html_escape("<lambda> & \"x\" 'y'"), "&lt;lambda&gt; &amp; &quot;x&quot; &#39;y&#39;");
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64_decode(base64_encode(std::string(kPngSignature) + "\xff\x00\x01")), std::string(kPngSignature) + "\xff\x00\x01");
}

// The OOM and kernel sections render too.
TEST(Report, OomAndKernelSectionsShowTheStatsNumbers) {
  Snapshot s = test::oom_with_kernels();
  std::string html = report_html(s, {.file_name = "oom<1>.memrec"});
  StatsResult st = stats(s, {.kernels = true});
  ASSERT_EQ(st.ooms.size(), 1u);
  EXPECT_EQ(st.ooms[0].requested, 4u << 20);
  EXPECT_EQ(st.ooms[0].device_free, 512u * 1024);
  size_t ooms = html.find("id=\"ooms\"");
  ASSERT_NE(ooms, std::string::npos);
  EXPECT_NE(html.find("Requested <b>" + format_bytes(st.ooms[0].requested) + "</b>", ooms), std::string::npos);
  EXPECT_NE(html.find(format_bytes(st.ooms[0].device_free) + " free", ooms), std::string::npos);
  size_t kernels = html.find("id=\"kernels\"");
  ASSERT_NE(kernels, std::string::npos);
  ASSERT_EQ(st.kernels.size(), 2u);
  EXPECT_EQ(st.kernels[0].total_ns, 400);  // gemm's two launches, before relu's one
  for (const KernelStats& k : st.kernels) {
    size_t name = html.find(html_escape(k.name), kernels);
    ASSERT_NE(name, std::string::npos) << k.name;
    size_t row = html.rfind("<tr>", name);
    EXPECT_TRUE(html.substr(row).starts_with("<tr><td class=\"num\">" + format_duration(k.total_ns) + "</td>"))
        << html.substr(row, name - row);
  }
  EXPECT_NE(html.find("<title>memrec report: oom&lt;1&gt;.memrec</title>"), std::string::npos);
  EXPECT_EQ(embedded(html, "image/svg+xml"), timeline_svg(s, 0));  // no screenshot given: the drawn timeline
}

// A long run's page is no larger than a shorter one's: the timeline is drawn over a fixed number of columns and the
// tables have a row per group, never one per event or scope. So the page's size does not follow the recording's.
TEST(Report, PageSizeDoesNotGrowWithTheRecording) {
  Snapshot shorter = test::training_loop(2000), longer = test::training_loop(4000);
  ASSERT_EQ(longer.events.size(), 480'001u);
  std::string a = report_html(shorter, {.file_name = "run.memrec"});
  std::string b = report_html(longer, {.file_name = "run.memrec"});
  EXPECT_LT(b.size(), a.size() + a.size() / 20) << a.size() << " bytes for 2000 steps, " << b.size() << " for 4000";
  EXPECT_LT(b.size(), 256u << 10);
  const std::string single = "<tr class=\"single\">";  // a row of one layer's checkpointing
  size_t rows = 0;
  for (size_t at = b.find(single); at != std::string::npos; at = b.find(single, at + 1)) ++rows;
  EXPECT_EQ(rows, 4u);
}

TEST(CliReport, PickleReportShowsTheCliNumbersInChromium) {
  TempDir dir;
  for (const std::string& pickle : {kAll, kPython}) {
    std::string html_path = dir / "report.html";
    auto r = memrec("report " + quote(pickle) + " -o " + quote(html_path));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::string html = read_file(html_path);
    json stats = json_of("stats " + quote(pickle));
    expect_timeline_picture(html);
    // PyTorch pickles have no module scopes: no layer table, and the what-if says why, as the CLI does.
    EXPECT_EQ(html.find("id=\"layers\""), std::string::npos);
    auto whatif = memrec("whatif checkpoint " + quote(pickle));
    ASSERT_NE(whatif.exit_code, 0);
    std::string reason = whatif.output.substr(whatif.output.find("error: ") + 7);
    EXPECT_NE(html.find(html_escape(reason.substr(0, reason.find('\n')))), std::string::npos) << reason;
    // Frame names hold '<' (e.g. "<lambda> (module.py:1097)"): escaped, never raw markup.
    for (const json& site : stats["top_sites"]["by_bytes"])
      EXPECT_NE(html.find(html_escape(site["key"].get<std::string>())), std::string::npos) << site["key"];
    EXPECT_EQ(html.find("<lambda>"), std::string::npos);
    EXPECT_EQ(html.find("<no stack>"), std::string::npos);

    if (std::system("command -v chromium >/dev/null") != 0) GTEST_SKIP() << "chromium is not installed";
    Page page = open_in_chromium(html_path, dir);
    expect_no_console_errors(page);
    expect_peaks(page.dom, stats);
    expect_timeline_picture(page.dom);
    EXPECT_NE(page.dom.find("Top allocation sites"), std::string::npos);
  }
}

TEST(CliReport, RecordedCpuRunHasTheLayerTableAndWhatIfOfTheCli) {
  TempDir dir;
  std::string run = dir / "run.memrec", html_path = dir / "report.html";
  auto rec = memrec("run transformer --layers 2 --device cpu -o " + quote(run));
  if (rec.output.find("is unavailable") != std::string::npos) GTEST_SKIP() << "memrec run is not in this build";
  ASSERT_EQ(rec.exit_code, 0) << rec.output;
  auto r = memrec("report " + quote(run) + " -o " + quote(html_path));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string html = read_file(html_path);
  expect_timeline_picture(html);

  if (std::system("command -v chromium >/dev/null") != 0) GTEST_SKIP() << "chromium is not installed";
  Page page = open_in_chromium(html_path, dir);
  expect_no_console_errors(page);
  expect_peaks(page.dom, json_of("stats " + quote(run)));
  // One row per group of `memrec stats --by layer`, with its bytes.
  json layers = json_of("stats " + quote(run) + " --by layer --top 100000")["live"];
  auto layer_rows = rows_of(page.dom, "layer");
  EXPECT_EQ(layer_rows.size(), layers.size());
  for (const json& l : layers) {
    std::string row = row_with_key(layer_rows, l["key"]);
    ASSERT_FALSE(row.empty()) << l["key"];
    EXPECT_NE(row.find(">" + format_bytes(l["bytes"]) + "<"), std::string::npos) << row;
  }
  // The what-if: all layers, then each layer alone, predicted as `memrec whatif checkpoint` predicts.
  json all = json_of("whatif checkpoint " + quote(run));
  auto total = rows_of(page.dom, "total");
  ASSERT_EQ(total.size(), 1u);
  EXPECT_NE(total[0].find(">" + format_bytes(all["predicted_peak"]) + "<"), std::string::npos) << total[0];
  auto singles = rows_of(page.dom, "single");
  EXPECT_EQ(singles.size(), all["layers"].size());
  for (const json& layer : all["layers"]) {
    json one = json_of("whatif checkpoint " + quote(run) + " --layers " + layer.get<std::string>());
    std::string row = row_with_key(singles, layer);
    ASSERT_FALSE(row.empty()) << layer;
    EXPECT_NE(row.find(">" + format_bytes(one["predicted_peak"]) + "<"), std::string::npos) << row;
  }
}

// tests/data/mlp_sequential_cpu.memrec: `memrec record` of tests/python/zoo/mlp_sequential.py on the CPU, whose
// nn.Sequential names its layers 0 .. 4. stats, whatif checkpoint and the report name them alike.
TEST(CliReport, SequentialLayersAreNamedAlikeEverywhere) {
  const std::string run = quote(test::data("mlp_sequential_cpu.memrec"));
  json all = json_of("whatif checkpoint " + run);
  ASSERT_FALSE(all["layers"].empty());
  std::vector<std::string> named = all["layers"];
  json stats = json_of("stats " + run + " --by layer --top 100000");
  for (const json& row : stats["live"])
    if (row["key"] != "<none>") named.push_back(row["key"]);
  for (const std::string& layer : named)
    EXPECT_EQ(json_of("whatif checkpoint " + run + " --layers " + layer)["layers"], json::array({layer})) << layer;
  auto unknown = memrec("whatif checkpoint " + run + " --layers 9");
  EXPECT_EQ(unknown.exit_code, 1) << unknown.output;

  TempDir dir;
  auto r = memrec("report " + run + " -o " + quote(dir / "r.html") + " --no-screenshot");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto singles = rows_of(read_file(dir / "r.html"), "single");
  EXPECT_EQ(singles.size(), all["layers"].size());
  for (const json& layer : all["layers"]) EXPECT_FALSE(row_with_key(singles, layer).empty()) << layer;
}

// Without a display the page embeds the timeline `memrec report --format svg` draws, and says why.
TEST(CliReport, WithoutADisplayTheReportEmbedsTheDrawnTimeline) {
  TempDir dir;
  std::string html_path = dir / "report.html", svg_path = dir / "timeline.svg";
  ASSERT_EQ(memrec("report " + quote(kAll) + " --format svg -o " + quote(svg_path)).exit_code, 0);
  std::string svg = read_file(svg_path);
  ASSERT_TRUE(svg.starts_with("<svg ")) << svg.substr(0, 100);
  // A display that does not exist: the viewer cannot start (xvfb-run is only used when $DISPLAY is unset).
  std::string env = viewer_built() ? "DISPLAY=:97531 " : "";
  auto r = run_command(env + quote(MEMREC_BINARY) + " report " + quote(kAll) + " -o " + quote(html_path));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("no viewer screenshot"), std::string::npos) << r.output;
  std::string html = read_file(html_path);
  EXPECT_EQ(embedded(html, "image/svg+xml"), svg);
  EXPECT_EQ(html.find("data:image/png"), std::string::npos);
  EXPECT_NE(html.find(format_bytes(json_of("stats " + quote(kAll))["peak_allocated"]["bytes"])), std::string::npos);

  ASSERT_EQ(memrec("report " + quote(kAll) + " -o " + quote(html_path) + " --no-screenshot").exit_code, 0);
  html = read_file(html_path);
  EXPECT_EQ(embedded(html, "image/svg+xml"), svg);
  EXPECT_NE(html.find("--no-screenshot was given"), std::string::npos);
}

// --format summary, what a notebook cell shows: the peaks of `memrec stats`, the drawn timeline, the owners at the
// peak of `memrec stats --by owner`; the page has the same owners.
TEST(CliReport, SummaryShowsThePeaksTheTimelineAndTheOwners) {
  TempDir dir;
  const std::string run = quote(test::data("mlp_sequential_cpu.memrec"));
  ASSERT_EQ(memrec("report " + run + " --format summary --top 5 -o " + quote(dir / "s.html")).exit_code, 0);
  ASSERT_EQ(memrec("report " + run + " --format svg -o " + quote(dir / "t.svg")).exit_code, 0);
  ASSERT_EQ(memrec("report " + run + " --no-screenshot --top 5 -o " + quote(dir / "r.html")).exit_code, 0);
  std::string summary = read_file(dir / "s.html"), page = read_file(dir / "r.html");
  EXPECT_NE(summary.find(read_file(dir / "t.svg")), std::string::npos);
  json peak = json_of("stats " + run)["peak_allocated"];
  EXPECT_NE(summary.find(fmt::format("class=\"peak-allocated\" title=\"{} bytes\">{}</b>",
                                     peak["bytes"].get<uint64_t>(), format_bytes(peak["bytes"]))),
            std::string::npos);
  json owners = json_of("stats " + run + " --by owner --top 5")["live"];
  ASSERT_EQ(owners.size(), 6u);  // five, then the rest
  std::string page_owners = page.substr(page.find("id=\"owners\""));
  for (const json& o : owners) {
    std::string row = fmt::format(">{}</td><td class=\"num\">{:.1f}%</td><td class=\"num\">{}</td>"
                                  "<td class=\"key\">{}</td>",
                                  format_bytes(o["bytes"]), o["share"].get<double>() * 100, o["count"].get<uint64_t>(),
                                  html_escape(o["key"].get<std::string>()));
    EXPECT_NE(summary.find(row), std::string::npos) << row;
    EXPECT_NE(page_owners.find(row), std::string::npos) << row;
  }
  auto svg_with_picture_flag = memrec("report " + run + " --format svg --no-screenshot -o " + quote(dir / "x.svg"));
  EXPECT_EQ(svg_with_picture_flag.exit_code, 1);
  EXPECT_NE(svg_with_picture_flag.output.find("--format svg always draws"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir / "x.svg"));
}

TEST(CliReport, ScreenshotOptionEmbedsThatPngExactly) {
  TempDir dir;
  // A 1x1 PNG.
  std::string png = base64_decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==");
  std::ofstream(dir / "one.png", std::ios::binary) << png;
  auto r = memrec("report " + quote(kAll) + " -o " + quote(dir / "r.html") + " --screenshot " + quote(dir / "one.png"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(embedded(read_file(dir / "r.html"), "image/png"), png);
  EXPECT_EQ(png_size(png), std::make_pair(1u, 1u));
}

TEST(CliReport, BadInputFailsWithOneError) {
  TempDir dir;
  std::ofstream(dir / "junk.memrec") << "not a recording";
  auto junk = memrec("report " + quote(dir / "junk.memrec") + " -o " + quote(dir / "r.html"));
  EXPECT_EQ(junk.exit_code, 1);
  EXPECT_TRUE(junk.output.starts_with("memrec: error: ")) << junk.output;
  EXPECT_EQ(std::count(junk.output.begin(), junk.output.end(), '\n'), 1) << junk.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "r.html"));

  EXPECT_NE(memrec("report " + quote(dir / "missing.pickle") + " -o " + quote(dir / "r.html")).exit_code, 0);
  EXPECT_NE(memrec("report " + quote(kAll)).exit_code, 0);  // no -o
  auto unwritable = memrec("report " + quote(kAll) + " -o " + quote(dir / "no/such/dir/r.html") + " --no-screenshot");
  EXPECT_EQ(unwritable.exit_code, 1);
  EXPECT_NE(unwritable.output.find("cannot write"), std::string::npos) << unwritable.output;
  auto onto_dir = memrec("report " + quote(kAll) + " -o " + quote(dir.path.string()) + " --no-screenshot");
  EXPECT_EQ(onto_dir.exit_code, 1);
  EXPECT_NE(onto_dir.output.find("cannot write"), std::string::npos) << onto_dir.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path.string() + ".partial"));
  auto not_png = memrec("report " + quote(kAll) + " -o " + quote(dir / "r.html") + " --screenshot " + quote(kAll));
  EXPECT_EQ(not_png.exit_code, 1);
  EXPECT_NE(not_png.output.find("is not a PNG"), std::string::npos) << not_png.output;
  EXPECT_NE(memrec("report " + quote(kAll) + " -o " + quote(dir / "r.html") + " --no-screenshot --screenshot " +
                   quote(kAll)).exit_code, 0);
}

}  // namespace
}  // namespace memrec
