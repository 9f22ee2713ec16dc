// Byte sizes as people write them: "80GiB", "512MB", "4096" in, "14.24 GiB" out.
//
// At the bottom layer because every layer reads or prints sizes: trace generators take them
// as arguments, policies as options, reports print them.
#pragma once

#include <cstdint>
#include <string>

namespace fraglab {

// Parses "80GiB", "512MB", "1.5GiB", "4096" into bytes (KiB/MiB/GiB/TiB and K/M/G/T are powers of
// 1024, KB/MB/GB/TB powers of 1000). Throws std::invalid_argument.
uint64_t parse_size(const std::string& text);
// 15286140928 -> "14.24 GiB"
std::string format_size(uint64_t bytes);
// Exactly, as an option is written: 2097152 -> "2MiB", 512 -> "512", 85017493504 -> itself
// (a unit only where it gives a whole number below 1024).
std::string option_size_text(uint64_t bytes);

}  // namespace fraglab
