#include "report/svg_chart.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

namespace fraglab::svg {

namespace {

// "Nice" tick step (1, 2 or 5 times a power of ten) giving about `count` ticks.
double tick_step(double span, int count) {
  if (span <= 0) return 1;
  double raw = span / count, mag = std::pow(10.0, std::floor(std::log10(raw)));
  double f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

std::string tick_label(double v) {
  if (std::abs(v) >= 1e6 && std::fmod(v, 1e6) == 0) return fmt::format("{}M", v / 1e6);
  if (std::abs(v) >= 1e3 && std::fmod(v, 1e3) == 0) return fmt::format("{}k", v / 1e3);
  return fmt::format("{:g}", v);
}

}  // namespace

std::string palette(size_t k) {
  static const char* colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                                 "#7f7f7f", "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896",
                                 "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5"};
  return colors[k % std::size(colors)];
}

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string line_chart(const std::vector<Series>& series, const std::string& x_label, const std::string& y_label,
                       double reference, const std::string& reference_label, int width, int height) {
  const int left = 64, right = 16, top = 12, bottom = 40;
  const double pw = width - left - right, ph = height - top - bottom;
  double x_max = 1, y_max = reference;
  for (const auto& s : series) {
    for (double x : s.x) x_max = std::max(x_max, x);
    for (double y : s.y) y_max = std::max(y_max, y);
  }
  double y_step = tick_step(y_max, 5);
  y_max = std::max(y_step, std::ceil(y_max / y_step) * y_step);
  double x_step = tick_step(x_max, 6);
  auto X = [&](double x) { return left + x / x_max * pw; };
  auto Y = [&](double y) { return top + ph - y / y_max * ph; };

  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" class=\"chart\">\n",
      width, height, width, height);
  for (double y = 0; y <= y_max + y_step / 2; y += y_step)
    out += fmt::format(
        "<line x1=\"{}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" class=\"grid\"/><text x=\"{}\" y=\"{:.1f}\" "
        "class=\"tick\" text-anchor=\"end\">{}</text>\n",
        left, left + pw, Y(y), Y(y), left - 6, Y(y) + 4, tick_label(y));
  for (double x = 0; x <= x_max; x += x_step)
    out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" class=\"tick\" text-anchor=\"middle\">{}</text>\n", X(x),
                       top + ph + 16, tick_label(x));
  out += fmt::format("<text x=\"{:.1f}\" y=\"{}\" class=\"axis\" text-anchor=\"middle\">{}</text>\n", left + pw / 2,
                     height - 4, escape(x_label));
  out += fmt::format(
      "<text x=\"12\" y=\"{:.1f}\" class=\"axis\" text-anchor=\"middle\" transform=\"rotate(-90 12 {:.1f})\">{}</text>\n",
      top + ph / 2, top + ph / 2, escape(y_label));
  for (const auto& s : series) {
    std::string points;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      points += fmt::format("{:.1f},{:.1f} ", X(s.x[i]), Y(s.y[i]));
    out += fmt::format(
        "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"><title>{}</title></polyline>\n",
        s.color, points, escape(s.name));
  }
  if (reference > 0)
    out += fmt::format(
        "<line x1=\"{}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" class=\"ref\"/><text x=\"{:.1f}\" y=\"{:.1f}\" "
        "class=\"tick\" text-anchor=\"end\">{}</text>\n",
        left, left + pw, Y(reference), Y(reference), left + pw - 4, Y(reference) - 4, escape(reference_label));
  out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{:.1f}\" class=\"frame\"/>\n</svg>\n", left,
                     top, pw, ph);
  return out;
}

std::string bar_chart(const std::vector<Bar>& bars, const std::string& value_label, double reference,
                      const std::string& reference_label, int width) {
  const int row = 18, label_w = 260, note_w = 150, top = 8, bottom = 50;
  const int height = top + bottom + row * static_cast<int>(bars.size());
  const double pw = width - label_w - note_w;
  double v_max = reference;
  for (const auto& b : bars) v_max = std::max(v_max, b.value);
  double step = tick_step(v_max, 5);
  v_max = std::max(step, std::ceil(v_max / step) * step);
  auto X = [&](double v) { return label_w + v / v_max * pw; };

  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" class=\"chart\">\n",
      width, height, width, height);
  const double axis_y = top + row * static_cast<double>(bars.size());
  for (double v = 0; v <= v_max + step / 2; v += step)
    out += fmt::format(
        "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{}\" y2=\"{:.1f}\" class=\"grid\"/><text x=\"{:.1f}\" y=\"{:.1f}\" "
        "class=\"tick\" text-anchor=\"middle\">{}</text>\n",
        X(v), X(v), top, axis_y, X(v), axis_y + 14, tick_label(v));
  for (size_t i = 0; i < bars.size(); ++i) {
    const auto& b = bars[i];
    double y = top + row * static_cast<double>(i);
    out += fmt::format(
        "<text x=\"{}\" y=\"{:.1f}\" class=\"label\" text-anchor=\"end\">{}</text><rect x=\"{}\" y=\"{:.1f}\" "
        "width=\"{:.1f}\" height=\"{}\" fill=\"{}\"><title>{}: {:g}</title></rect><text x=\"{:.1f}\" y=\"{:.1f}\" "
        "class=\"tick\">{}</text>\n",
        label_w - 6, y + 13, escape(b.label), label_w, y + 2, std::max(0.0, X(b.value) - label_w), row - 4, b.color,
        escape(b.label), b.value, X(b.value) + 4, y + 13, escape(b.note));
  }
  if (reference > 0)
    out += fmt::format(
        "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{}\" y2=\"{:.1f}\" class=\"ref\"/><text x=\"{:.1f}\" y=\"{:.1f}\" "
        "class=\"tick\" text-anchor=\"middle\">{}</text>\n",
        X(reference), X(reference), top, axis_y, X(reference), axis_y + 28.0, escape(reference_label));
  out += fmt::format("<text x=\"{:.1f}\" y=\"{}\" class=\"axis\" text-anchor=\"middle\">{}</text>\n</svg>\n",
                     label_w + pw / 2, height - 2, escape(value_label));
  return out;
}

}  // namespace fraglab::svg
