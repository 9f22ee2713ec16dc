// The bundled recordings that the tests "on every recording" read one by one, sorted by name.
//
// Under the sanitizers (CI's ASan+UBSan stage) those tests run ten times slower than in Release: the
// three of them took 6 of that stage's 7 minutes of tests, on a 30-minute CI. There they read one
// recording in three (every third by name, the same ones each run); the Release stage reads them all,
// so every recording's result is still checked, and the sanitizers still see each kind of recording
// (histories from the start, mid-run, rings, OOMs, private pools, expandable segments).
#pragma once

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace fraglab::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr size_t kRecordingStride = 3;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr size_t kRecordingStride = 3;
#else
inline constexpr size_t kRecordingStride = 1;
#endif
#else
inline constexpr size_t kRecordingStride = 1;
#endif

// The files directly in `dirs` whose names contain `marker`, sorted by path; under the sanitizers
// every kRecordingStride-th of them.
inline std::vector<std::filesystem::path> every_recording(std::initializer_list<std::string> dirs,
                                                          std::string_view marker = ".pickle") {
  std::vector<std::filesystem::path> all;
  for (const std::string& dir : dirs)
    for (const auto& entry : std::filesystem::directory_iterator(dir))
      if (entry.is_regular_file() && entry.path().filename().string().find(marker) != std::string::npos)
        all.push_back(entry.path());
  std::sort(all.begin(), all.end());
  std::vector<std::filesystem::path> taken;
  for (size_t i = 0; i < all.size(); i += kRecordingStride) taken.push_back(all[i]);
  return taken;
}

// A count the whole set reaches, as the sample must reach it (a third of it under the sanitizers,
// rounded down).
constexpr size_t at_least(size_t whole_set_count) { return whole_set_count / kRecordingStride; }

}  // namespace fraglab::test
