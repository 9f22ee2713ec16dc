// fraglab-gui's headless screenshot mode under Xvfb: the PNG has the window's size, is
// not blank, shows the block map's size-class colors; bad input exits 2 and writes nothing.
// Built only where the app, xvfb-run and stb_image are (tests/CMakeLists.txt).
#ifdef FRAGLAB_GUI_BINARY

#include <stb_image.h>
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "gui/model/palette.h"
#include "tests/gui_test_traces.h"
#include "traces/trace_io.h"

namespace {

int run_gui(const std::string& args) {
  std::string command = std::string(FRAGLAB_XVFB_RUN) + " -a -s '-screen 0 1280x1024x24' " + FRAGLAB_GUI_BINARY + " " +
                        args + " > /dev/null 2>&1";
  // xvfb-run's own failures (3: Xvfb did not start; 5, 6: its temporary files) say
  // nothing about the app; machines running several X servers at once see them.
  for (int attempt = 0;; ++attempt) {
    int status = std::system(command.c_str());
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if ((code != 3 && code != 5 && code != 6) || attempt == 2) return code;
  }
}

struct Image {
  int width = 0, height = 0;
  std::map<uint32_t, int> colors;  // RGBA as the palette packs it -> pixels
};

Image decode(const std::string& path) {
  Image img;
  int channels = 0;
  unsigned char* data = stbi_load(path.c_str(), &img.width, &img.height, &channels, 4);
  REQUIRE(data);
  for (int i = 0; i < img.width * img.height; ++i) {
    const unsigned char* p = data + 4 * i;
    ++img.colors[fraglab::gui::rgba(p[0], p[1], p[2])];
  }
  stbi_image_free(data);
  return img;
}

}  // namespace

TEST_CASE("fraglab-gui --screenshot renders the block map at the peak", "[gui][gui_screenshot]") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "fraglab_gui_screenshot_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string trace = (dir / "frag.jsonl").string(), png = (dir / "out.png").string();
  fraglab::save_trace(fraglab::test::make_fragmenting_trace(3000), trace);

  REQUIRE(run_gui(trace + " --policy bestfit --at peak --width 900 --height 700 --screenshot " + png) == 0);
  Image img = decode(png);
  CHECK(img.width == 900);
  CHECK(img.height == 700);
  CHECK(img.colors.size() > 20);  // not blank: text, plots, the map
  int classes = 0;
  for (const auto& c : fraglab::gui::kSizeClasses)
    if (img.colors.count(c.color) && img.colors[c.color] >= 20) ++classes;
  CHECK(classes >= 4);
  CHECK(img.colors[fraglab::gui::kFreeColor] >= 20);  // free memory shows

  SECTION("colored by allocation site") {
    REQUIRE(run_gui(trace + " --at peak --color site --width 900 --height 700 --screenshot " + png) == 0);
    Image sites = decode(png);
    CHECK(sites.colors[fraglab::gui::kSiteColors[0]] >= 20);
    CHECK(sites.colors[fraglab::gui::kSiteColors[1]] >= 20);
  }
  SECTION("bad input exits 2 and writes no image") {
    fs::remove(png);
    CHECK(run_gui((dir / "missing.jsonl").string() + " --screenshot " + png) == 2);
    CHECK(run_gui(trace + " --policy no_such_policy --screenshot " + png) == 2);
    CHECK(run_gui(trace + " --policy 'bestfit:bogus=1' --screenshot " + png) == 2);
    std::ofstream(dir / "broken.jsonl") << "{\"op\": \"alloc\", \"id\": 1, \"size\": \n";
    CHECK(run_gui((dir / "broken.jsonl").string() + " --screenshot " + png) == 2);
    CHECK_FALSE(fs::exists(png));
  }
  fs::remove_all(dir);
}

#endif  // FRAGLAB_GUI_BINARY

#ifdef FRAGLAB_GUI_BINARY
TEST_CASE("fraglab-gui --screenshot renders every view on a snapshot", "[gui][gui_screenshot]") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "fraglab_gui_views_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  // A CUDA-graph snapshot: private pools, recorded addresses, stacks-free.
  std::string trace = std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots/graphs_two_pools.default.pickle.gz";
  std::string png = (dir / "view.png").string();
  for (const char* view : {"blockmap", "memory", "events", "oom", "compare", "summary", "help"}) {
    INFO(view);
    fs::remove(png);
    REQUIRE(run_gui(trace + " --at peak --view " + view + " --width 900 --height 700 --screenshot " + png) == 0);
    Image img = decode(png);
    CHECK(img.width == 900);
    CHECK(img.height == 700);
    CHECK(img.colors.size() > 20);  // not blank
    if (std::string(view) == "memory" || std::string(view) == "blockmap") {
      // The allocations themselves, in their size-class colors (bands keep the class color at full shade).
      int classes = 0;
      for (const auto& c : fraglab::gui::kSizeClasses)
        if (img.colors.count(c.color) && img.colors[c.color] >= 20) ++classes;
      CHECK(classes >= 2);
    }
  }
  SECTION("the recorded lane by name, colored by pool") {
    REQUIRE(run_gui(trace + " --policy recorded --at peak --color pool --width 900 --height 700 --screenshot " + png) ==
            0);
    Image img = decode(png);
    CHECK(img.colors[fraglab::gui::kSiteColors[0]] >= 20);  // the first private pool's blocks
  }
  SECTION("two traces side by side") {
    std::string second =
        std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots/graphs_two_pools.expandable.pickle.gz";
    REQUIRE(run_gui(trace + " " + second + " --policy pytorch --view compare --width 900 --height 700 --screenshot " +
                    png) == 0);
    Image img = decode(png);
    CHECK(img.colors.size() > 20);
    CHECK(img.colors[fraglab::gui::rgba(80, 200, 230)] >= 20);  // the second trace's reserved line
    fs::remove(png);
    CHECK(run_gui(trace + " " + (dir / "missing.jsonl").string() + " --view compare --screenshot " + png) == 2);
    CHECK_FALSE(fs::exists(png));
  }
  SECTION("--gpu opens another GPU's history of a one-process, two-GPU snapshot") {
    const std::string two = std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots/two_devices.default.pickle.gz";
    const std::string first = (dir / "gpu0.png").string(), second = (dir / "gpu1.png").string();
    REQUIRE(run_gui(two + " --view memory --at peak --width 900 --height 700 --screenshot " + first) == 0);
    REQUIRE(run_gui(two + " --gpu 1 --view memory --at peak --width 900 --height 700 --screenshot " + second) == 0);
    CHECK(decode(first).colors != decode(second).colors);  // GPU 1's history, not device 0's again
    fs::remove(png);
    CHECK(run_gui(two + " --gpu 3 --screenshot " + png) == 2);  // no data there: refused, nothing written
    CHECK_FALSE(fs::exists(png));
  }
  SECTION("a snapshot without history opens at its state, the last event, and its peak is there too") {
    const std::string state =
        std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots/gpt2_train.default_nohistory.pickle.gz";
    const std::string opened = (dir / "state_opened.png").string(), last = (dir / "state_last.png").string(),
                      peak = (dir / "state_peak.png").string(), first = (dir / "state_first.png").string();
    const std::string common = " --policy recorded --width 900 --height 700 --screenshot ";
    REQUIRE(run_gui(state + common + opened) == 0);
    REQUIRE(run_gui(state + " --at 2" + common + last) == 0);  // its three live blocks: events 0, 1, 2
    REQUIRE(run_gui(state + " --at peak" + common + peak) == 0);
    REQUIRE(run_gui(state + " --at 0" + common + first) == 0);
    CHECK(decode(opened).colors == decode(last).colors);
    CHECK(decode(peak).colors == decode(last).colors);
    CHECK(decode(first).colors != decode(last).colors);  // one live block of three: not the snapshot's state
  }
  SECTION("the recorded lane on a trace without addresses fails like a bad policy") {
    std::string plain = (dir / "plain.jsonl").string();
    fraglab::save_trace(fraglab::test::make_fragmenting_trace(200), plain);
    CHECK(run_gui(plain + " --policy recorded --screenshot " + png) == 2);
  }
  fs::remove_all(dir);
}
#endif
