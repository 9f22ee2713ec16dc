// The CUDA address model (device/cuda_address_space.h): each placement rule on its own, then the model
// against every address the probe measured on an H100 (tools/cuda_addresses/data): the device calls
// of the bundled recordings and the synthetic sequences, each in a fresh process.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "device/cuda_address_space.h"
#include "device/sim_device.h"

using namespace fraglab;

namespace {

constexpr uint64_t MiB = 1ull << 20;
const std::string kData = std::string(FRAGLAB_SOURCE_DIR) + "/tools/cuda_addresses/data";

// Context-free layout: no free stretches in the context's chunk, so each rule shows alone.
CudaAddressLayout bare() {
  CudaAddressLayout layout;
  layout.context_free.clear();
  return layout;
}

struct Placed {
  char kind;  // 'a' cudaMalloc, 'r' cuMemAddressReserve
  uint64_t size;
  Addr addr;
};

// Runs an op list (addrprobe.py's format) through the model.
std::vector<Placed> run_ops(const std::string& path) {
  CudaAddressSpace space;
  std::vector<Addr> allocs, ranges;
  std::vector<Placed> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    char op;
    uint64_t arg;
    if (!(s >> op >> arg)) continue;
    if (op == 'a') allocs.push_back(space.place_segment(arg).value()), out.push_back({'a', arg, allocs.back()});
    if (op == 'f') space.free_segment(allocs.at(arg));
    if (op == 'r') ranges.push_back(space.place_range(arg).value()), out.push_back({'r', arg, ranges.back()});
    if (op == 'R') space.free_range(ranges.at(arg));
  }
  return out;
}

std::vector<Placed> read_measured(const std::string& path) {
  std::vector<Placed> out;
  std::ifstream in(path);
  std::string kind, index, size, addr;
  while (in >> kind) {
    if (kind == "a" || kind == "r") {
      in >> index >> size >> addr;
      out.push_back({kind[0], std::stoull(size), std::stoull(addr, nullptr, 16)});
    } else {
      std::getline(in, addr);  // the 'context FREE TOTAL' line
    }
  }
  return out;
}

}  // namespace

TEST_CASE("cudaMalloc chunks are carved top-down, 32 MiB each, segment at the bottom", "[addresses]") {
  CudaAddressSpace s(bare());
  Addr a = *s.place_segment(96 * MiB);
  Addr b = *s.place_segment(20 * MiB);
  Addr c = *s.place_segment(48 * MiB);
  CHECK(a % (32 * MiB) == 0);
  CHECK(b == a - 32 * MiB);
  CHECK(c == b - 64 * MiB);
}

TEST_CASE("small segments fill the newest chunk's free tail first, lowest address first", "[addresses]") {
  CudaAddressSpace s(bare());
  Addr a = *s.place_segment(20 * MiB);  // tail: 12 MiB
  Addr b = *s.place_segment(20 * MiB);  // tail: 12 MiB, newer
  CHECK(s.place_segment(2 * MiB) == b + 20 * MiB);
  CHECK(s.place_segment(10 * MiB) == b + 22 * MiB);
  CHECK(s.place_segment(4 * MiB) == a + 20 * MiB);  // b's tail is full: the older chunk
  CHECK(s.place_segment(1 * MiB) == a + 24 * MiB);
  CHECK(s.place_segment(512) == a + 25 * MiB);      // below a page: 512-byte granularity
  CHECK(s.place_segment(2 * MiB) == a + 26 * MiB);  // a page or more: 2 MiB-aligned
}

TEST_CASE("a freed chunk returns to free address space; an exactly fitting hole is passed over", "[addresses]") {
  CudaAddressSpace s(bare());
  std::vector<Addr> a;
  for (int i = 0; i < 4; ++i) a.push_back(*s.place_segment(96 * MiB));
  s.free_segment(a[1]);
  CHECK(s.place_segment(96 * MiB) == a[3] - 96 * MiB);  // the 96 MiB hole is too tight
  Addr top = *s.place_segment(32 * MiB);                // a smaller chunk: the hole's top
  CHECK(top == a[1] + 64 * MiB);
  s.free_segment(top);
  s.free_segment(a[2]);                                  // merges with a[1]'s hole: 192 MiB
  CHECK(s.place_segment(148 * MiB) == a[2] + 32 * MiB);  // the top of the hole, for a 160 MiB chunk
}

TEST_CASE("reserved ranges grow up from their own region; their tails take small segments", "[addresses]") {
  CudaAddressSpace s(bare());
  Addr r0 = *s.place_range(91220 * MiB);
  Addr r1 = *s.place_range(91214 * MiB);
  CHECK(r0 == 0x302000000);
  CHECK(r1 == r0 + 91232 * MiB);
  Addr tail = *s.place_segment(2 * MiB);
  CHECK(tail == r1 + 91214 * MiB);  // the newest chunk with room: r1's tail
  s.free_range(r1);
  s.free_segment(tail);  // the chunk's last user: its address space goes back
  CHECK(s.place_range(1024 * MiB) == r1);
}

TEST_CASE("SimDevice: the address model is a setting; both keep segments apart", "[addresses]") {
  for (AddressModel model : {AddressModel::Cuda, AddressModel::Bump}) {
    SimDeviceConfig config;
    config.addresses = model;
    SimDevice dev(config);
    Addr a = *dev.allocate_segment(20 * MiB, 0);
    Addr b = *dev.allocate_segment(20 * MiB, 0);
    CHECK((b + 20 * MiB <= a || a + 20 * MiB <= b));
    dev.free_segment(b, 20 * MiB);
    Addr c = *dev.allocate_segment(20 * MiB, 0);
    if (model == AddressModel::Cuda) CHECK(c == b);  // the driver reuses the freed chunk
    if (model == AddressModel::Bump) CHECK(c > b);   // bump addresses only grow
  }
  CHECK(parse_address_model("cuda") == AddressModel::Cuda);
  CHECK(parse_address_model("bump") == AddressModel::Bump);
  CHECK_FALSE(parse_address_model("lowest").has_value());
}

TEST_CASE("the model predicts every address the probe measured on the H100", "[addresses]") {
  size_t files = 0, addresses = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kData + "/ops")) {
    std::string name = entry.path().stem().string();
    INFO(name);
    auto predicted = run_ops(entry.path().string());
    for (const char* run : {"plain1", "plain2"}) {
      auto measured = read_measured(kData + "/measured/" + name + "." + run + ".txt");
      REQUIRE(measured.size() == predicted.size());
      // cudaMalloc's region moves with the process's mmap base: compare offsets from the first
      // segment. The reserve region starts at a fixed address: compare what lies there as it is.
      Addr first_p = 0, first_m = 0;
      for (size_t i = 0; i < predicted.size(); ++i) {
        INFO(run << " call " << i);
        REQUIRE(predicted[i].kind == measured[i].kind);
        REQUIRE(predicted[i].size == measured[i].size);
        if (predicted[i].kind == 'r' || measured[i].addr < (1ull << 44)) {  // in the reserve region
          CHECK(predicted[i].addr == measured[i].addr);
          continue;
        }
        if (first_m == 0) first_p = predicted[i].addr, first_m = measured[i].addr;
        CHECK(predicted[i].addr - first_p == measured[i].addr - first_m);
        ++addresses;
      }
    }
    ++files;
  }
  CHECK(files == 23);
  CHECK(addresses > 2000);
}

TEST_CASE("random segments and ranges never overlap", "[addresses]") {
  CudaAddressSpace s;
  std::map<Addr, uint64_t> live;  // address -> size, segments and ranges alike
  std::map<Addr, bool> is_range;
  uint64_t seed = 12345;
  auto next = [&seed] { return (seed = seed * 6364136223846793005ull + 1442695040888963407ull) >> 33; };
  for (int step = 0; step < 20000; ++step) {
    if (!live.empty() && next() % 100 < 45) {
      auto it = live.begin();
      std::advance(it, next() % live.size());
      if (is_range[it->first])
        s.free_range(it->first);
      else
        s.free_segment(it->first);
      is_range.erase(it->first);
      live.erase(it);
      continue;
    }
    bool range = next() % 20 == 0;
    uint64_t size =
        range ? (1 + next() % 64) * (2 * MiB) : (next() % 4 == 0 ? 512 * (1 + next() % 4096) : (1 + next() % 80) * MiB);
    Addr a = (range ? s.place_range(size) : s.place_segment(size)).value();
    auto after = live.lower_bound(a);
    if (after != live.end()) REQUIRE(a + size <= after->first);
    if (after != live.begin()) REQUIRE(std::prev(after)->first + std::prev(after)->second <= a);
    live.emplace(a, size);
    is_range[a] = range;
  }
}
