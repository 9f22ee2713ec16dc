// The command line's conventions (issue 42): `-` reads standard input, --gpu and --device each mean one thing,
// progress on a terminal's stderr only, tune and diagnose agree on the exit code when no setting fits.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "tests/shell_command.h"

namespace {

using Result = fraglab::test::CliResult;

Result shell(const std::string& command) { return fraglab::test::run_shell(command); }

const std::string kCli = FRAGLAB_CLI;
const std::string kSnap = std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/snapshots/";
const std::string kOom = kSnap + "bert_varlen_oom.default_cap0.16_ring8000.pickle.gz";

std::string without_first_line(const std::string& text) { return text.substr(text.find('\n') + 1); }

}  // namespace

TEST_CASE("a trace given as - is read from standard input, gzip or not, pipe or file", "[cli]") {
  Result file = shell(kCli + " info " + kOom);
  REQUIRE(file.code == 0);
  for (const std::string& feed : {"cat " + kOom + " | ", "gunzip -c " + kOom + " | "}) {
    Result piped = shell(feed + kCli + " info -");
    INFO(feed << "\n" << piped.output);
    CHECK(piped.code == 0);
    CHECK(piped.output.rfind("trace        /dev/stdin (pytorch-snapshot)", 0) == 0);
    CHECK(without_first_line(piped.output) == without_first_line(file.output));  // the same numbers
  }
  Result redirected = shell(kCli + " info - < " + kOom);
  CHECK(redirected.code == 0);
  CHECK(without_first_line(redirected.output) == without_first_line(file.output));
  // Every command that reads a trace: the same JSON as from the file, the trace's name apart.
  Result diag_file = shell(kCli + " diagnose --no-search --json " + kOom);
  Result diag_pipe = shell("gunzip -c " + kOom + " | " + kCli + " diagnose --no-search --json -");
  CHECK(diag_pipe.code == diag_file.code);
  std::string renamed = diag_file.output;
  for (size_t at = renamed.find(kOom); at != std::string::npos; at = renamed.find(kOom, at))
    renamed.replace(at, kOom.size(), "/dev/stdin");
  CHECK(diag_pipe.output == renamed);
  SECTION("errors name '-' and the byte offset; standard input is read once") {
    Result cut = shell("head -c 1000 " + kOom + " | " + kCli + " info - 2>&1");
    CHECK(cut.code == 2);
    CHECK(cut.output.find("fraglab: error: -: byte offset 1000: gzip data is truncated") != std::string::npos);
    Result junk = shell("echo garbage | " + kCli + " info - 2>&1");
    CHECK(junk.code == 2);
    CHECK(junk.output.find("-: not a trace fraglab reads") != std::string::npos);
    Result twice = shell("cat " + kOom + " | " + kCli + " diff - - 2>&1");
    CHECK(twice.code == 2);
    CHECK(twice.output.find("standard input is given twice") != std::string::npos);
  }
}

TEST_CASE("cli: --gpu is the snapshot's GPU, --device only where a replay runs", "[cli]") {
  const std::string two = kSnap + "two_devices.default.pickle.gz";
  Result gpu1 = shell(kCli + " info " + two + " --gpu 1");
  Result alias = shell(kCli + " info " + two + " --trace-device 1");
  CHECK(gpu1.code == 0);
  CHECK(gpu1.output == alias.output);
  CHECK(gpu1.output != shell(kCli + " info " + two).output);
  for (const char* command : {"info", "replay", "tune", "diagnose", "fidelity"}) {
    Result r = shell(kCli + " " + command + " " + two + " --device 1 2>&1");
    INFO(command << ": " << r.output);
    CHECK(r.code == 2);
    CHECK(r.output.find("is --gpu 1") != std::string::npos);
  }
  CHECK(shell(kCli + " replay " + two + " --gpu 1 --device sim > /dev/null").code == 0);
}

TEST_CASE("progress goes to a terminal's stderr only, never into a pipe", "[cli]") {
  if (shell("command -v script > /dev/null").code != 0) {
    WARN("skipped: no script(1) to fake a terminal");
    return;
  }
  const std::string run = "FRAGLAB_PROGRESS_AFTER_MS=0 " + kCli + " diagnose -j 2 " + kOom;
  // script(1) gives the command a terminal; its stdout goes to a file, so the terminal shows stderr alone.
  Result tty = shell("script -qec '" + run + " > /dev/null' /dev/null");
  INFO(tty.output);
  CHECK(tty.output.find("fraglab diagnose: ") != std::string::npos);
  CHECK(tty.output.find("\r\033[K") != std::string::npos);  // redrawn in place, erased at the end
  Result pipe = shell(run + " 2>&1 > /dev/null");
  CHECK(pipe.output.find("fraglab diagnose: ") == std::string::npos);
  CHECK(pipe.output.find('\r') == std::string::npos);
  // The answer on stdout is the same with and without a terminal.
  const int tty_code = shell("script -qec '" + run + " --json > /tmp/fraglab_progress_tty.json' /dev/null").code;
  Result plain = shell(run + " --json");
  CHECK(tty_code == plain.code);  // 1: no setting fits this recording's capacity
  Result via_tty = shell("cat /tmp/fraglab_progress_tty.json");
  CHECK(plain.output == via_tty.output);
  std::filesystem::remove("/tmp/fraglab_progress_tty.json");
}

TEST_CASE("tune and diagnose agree on the exit code: 1 when no setting fits, else 0", "[cli]") {
  const std::string seed = std::string(FRAGLAB_SOURCE_DIR) + "/traces/corpus/seed_examples.default.pickle.gz";
  struct Case {
    std::string trace, capacity;
    int code;
  };
  for (const Case& c : {Case{kOom, "", 1}, Case{seed, "20GiB", 0}, Case{seed, "", 0}, Case{seed, "1MiB", 1}}) {
    const std::string cap = c.capacity.empty() ? "" : " --capacity " + c.capacity;
    Result tune = shell(kCli + " tune -j 2 " + c.trace + cap + " > /dev/null 2>&1");
    Result diagnose = shell(kCli + " diagnose -j 2 " + c.trace + cap + " > /dev/null 2>&1");
    INFO(c.trace << cap);
    CHECK(tune.code == c.code);
    CHECK(diagnose.code == c.code);
  }
}

TEST_CASE("compare and fit read - as standard input too; ranks says why it cannot", "[cli]") {
  auto replaced = [](std::string text, const std::string& from, const std::string& to) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
      text.replace(at, from.size(), to);
    return text;
  };
  const std::string seed = std::string(FRAGLAB_SOURCE_DIR) + "/traces/corpus/seed_examples.default.pickle.gz";
  Result file = shell(kCli + " compare " + seed + " -p pytorch,bestfit -q");
  Result piped = shell("cat " + seed + " | " + kCli + " compare - -p pytorch,bestfit -q");
  REQUIRE(file.code == 0);
  CHECK(piped.code == 0);
  // The command line names /dev/stdin; the trace's column is named after the file, "stdin" for standard input.
  CHECK(piped.output == replaced(replaced(file.output, seed, "/dev/stdin"), "seed_examples.default", "stdin"));

  const std::string fit = std::string(FRAGLAB_SOURCE_DIR) + "/tests/data/fit/kv_server.";
  const std::string rest = " " + fit + "b4.default.pickle.gz@4 " + fit + "b6.default.pickle.gz@6";
  Result fit_file = shell(kCli + " fit --capacity 4GiB --no-search " + fit + "b2.default.pickle.gz@2" + rest);
  // CLI11 reads "-@2" as an option: after "--" it is a probe like any other.
  Result fit_pipe =
      shell("gunzip -c " + fit + "b2.default.pickle.gz | " + kCli + " fit --capacity 4GiB --no-search -- -@2" + rest);
  INFO(fit_file.output << "\n" << fit_pipe.output);
  REQUIRE(fit_file.code == 0);
  CHECK(fit_pipe.code == 0);
  CHECK(fit_pipe.output == replaced(fit_file.output, fit + "b2.default.pickle.gz", "/dev/stdin"));

  Result ranks = shell("cat " + seed + " | " + kCli + " ranks - 2>&1");
  CHECK(ranks.code == 2);
  CHECK(ranks.output.find("standard input ('-') is one stream and names no rank") != std::string::npos);
}

TEST_CASE("info, convert, export and ranks show progress on a terminal's stderr, never in a pipe", "[cli]") {
  if (shell("command -v script > /dev/null").code != 0) {
    WARN("skipped: no script(1) to fake a terminal");
    return;
  }
  const std::string out = (std::filesystem::temp_directory_path() / "fraglab_progress_out").string();
  const std::string ranks = kSnap + "ranks/ddp_train.default_rank";
  struct Case {
    std::string args, shown;
  };
  for (const Case& c :
       {Case{"info " + kOom, "fraglab info: reading the trace"},
        Case{"convert " + kOom + " " + out + ".fltrace", "fraglab convert: "},
        Case{"export " + kOom + " " + out + ".json", "fraglab export: "},
        Case{"ranks --no-search " + ranks + "0.pickle.gz " + ranks + "1.pickle.gz", "fraglab ranks: job"}}) {
    const std::string run = "FRAGLAB_PROGRESS_AFTER_MS=0 " + kCli + " " + c.args;
    Result tty = shell("script -qec '" + run + " > /dev/null' /dev/null");
    INFO(c.args << "\n" << tty.output);
    CHECK(tty.code == 0);
    CHECK(tty.output.find(c.shown) != std::string::npos);
    Result pipe = shell(run + " 2>&1 > /dev/null");
    CHECK(pipe.output.find(c.shown) == std::string::npos);
    CHECK(pipe.output.find('\r') == std::string::npos);
  }
  std::filesystem::remove(out + ".fltrace");
  std::filesystem::remove(out + ".json");
}

TEST_CASE("an output named /dev/stdout or /proc/self/fd/1 is written through to the descriptor, never renamed over",
          "[cli][hardening]") {
  // On a file (`> out`), the link's target is a regular file: renaming a temporary over the link replaced
  // /dev/stdout itself (as root) and printed nothing. /proc/self/fd/1 follows the same path and cannot be
  // replaced, so the check is safe to run anywhere.
  const std::string seed = std::string(FRAGLAB_SOURCE_DIR) + "/traces/corpus/seed_examples.default.pickle.gz";
  // results.csv: what compare writes that holds no replay time (the Markdown report's times differ run to run).
  const std::string out = (std::filesystem::temp_directory_path() / "fraglab_descriptor_out.csv").string();
  const std::string file = (std::filesystem::temp_directory_path() / "fraglab_descriptor_file.csv").string();
  Result plain = shell(kCli + " compare " + seed + " -p bestfit -q --csv " + file + "; cat " + file);
  Result through = shell(kCli + " compare " + seed + " -p bestfit -q --csv /proc/self/fd/1 > " + out + "; cat " + out);
  CHECK(plain.code == 0);
  CHECK(through.code == 0);
  CHECK(through.output == plain.output);
  CHECK(through.output.find("seed_examples.default.pickle.gz,bestfit,") != std::string::npos);
  CHECK(shell("test -L /dev/stdout").code == 0);
  std::filesystem::remove(out);
  std::filesystem::remove(file);
}
