// Inline SVG charts for the self-contained HTML report: no scripts, no external assets,
// so the report opens from a file, a CI artifact or an e-mail attachment alike.
// Hand-written because Debian ships no C++ plotting library that emits plain SVG.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fraglab::svg {

struct Series {
  std::string name;
  std::string color;  // CSS colour
  std::vector<double> x, y;
};

// A distinct colour for series k (Tableau 20, cycled).
std::string palette(size_t k);

std::string escape(const std::string& text);  // XML/HTML text escaping

// Lines over a shared x axis; `reference` > 0 draws a dashed horizontal line (the bound).
std::string line_chart(const std::vector<Series>& series, const std::string& x_label, const std::string& y_label,
                       double reference, const std::string& reference_label, int width = 760, int height = 300);

struct Bar {
  std::string label;
  std::string color;
  double value;
  std::string note;  // drawn after the bar
};

// Horizontal bars, one per label; `reference` > 0 draws a dashed vertical line.
std::string bar_chart(const std::vector<Bar>& bars, const std::string& value_label, double reference,
                      const std::string& reference_label, int width = 760);

}  // namespace fraglab::svg
