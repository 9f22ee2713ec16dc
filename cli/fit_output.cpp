#include "cli/fit_output.h"

#include <fmt/core.h>

#include <algorithm>

#include "traces/units.h"

namespace fraglab::cli {

namespace {

std::string conf_label(const SettingAnswer& s) {
  std::string conf = s.conf.empty() ? "every default" : "PYTORCH_CUDA_ALLOC_CONF=" + s.conf;
  return s.label == "default" || s.label == "expandable segments" || s.label == "given" ? conf : s.label + ": " + conf;
}

const BatchPoint* point_at(const SettingAnswer& s, uint64_t batch) {
  for (const auto& p : s.points)
    if (p.batch == batch) return &p;
  return nullptr;
}

nlohmann::json point_json(const BatchPoint& p) {
  nlohmann::json j = {{"batch", p.batch},
                      {"fits", p.fits},
                      {"peak_reserved", p.peak_reserved},
                      {"peak_allocated", p.peak_allocated},
                      {"live_peak", p.live_peak}};
  if (!p.fits)
    j["first_failure"] = {{"event_index", p.fail_event}, {"request_bytes", p.fail_request}, {"site", p.fail_site}};
  j["workspaces_not_served"] = p.skipped_workspaces;
  return j;
}

}  // namespace

std::string fit_sentence(const FitReport& r) {
  std::string out;
  for (const auto& s : r.answers) {
    const BatchPoint* p = point_at(s, s.largest_batch);
    out += fmt::format("{}{} under {}{}", out.empty() ? "" : "; ", s.largest_batch, conf_label(s),
                       p ? fmt::format(" (peak reserved {})", format_size(p->peak_reserved)) : std::string());
  }
  return "largest batch that fits " + format_size(r.capacity) + ": " + out;
}

nlohmann::json fit_json(const BatchModel& model, const FitReport& r, const std::string& capacity_note) {
  nlohmann::json probes = nlohmann::json::array();
  for (size_t k = 0; k < model.probes().size(); ++k) {
    const auto& p = model.probes()[k];
    probes.push_back({{"path", p.name},
                      {"batch", p.batch},
                      {"events", p.trace.events.size()},
                      {"reference", k == model.reference_index()}});
  }
  const auto& al = model.alignment();
  std::vector<uint64_t> laws = model.law_counts();
  nlohmann::json law_counts;
  for (size_t k = 0; k < laws.size(); ++k) law_counts[size_law_name(static_cast<SizeLaw>(k))] = laws[k];
  nlohmann::json answers = nlohmann::json::array();
  for (const auto& s : r.answers) {
    nlohmann::json points = nlohmann::json::array();
    for (const auto& p : s.points) points.push_back(point_json(p));
    const BatchPoint* at = point_at(s, s.largest_batch);
    answers.push_back(
        {{"conf", s.conf},
         {"env", "PYTORCH_CUDA_ALLOC_CONF=" + s.conf},
         {"label", s.label},
         {"largest_batch", s.largest_batch},
         {"peak_reserved_at_largest", at ? nlohmann::json(at->peak_reserved) : nlohmann::json(nullptr)},
         {"first_failing_batch", s.first_failing ? nlohmann::json(*s.first_failing) : nlohmann::json(nullptr)},
         {"points", points}});
  }
  nlohmann::json growth = nlohmann::json::array();
  for (const auto& g : r.growth)
    growth.push_back({{"key", g.key}, {"bytes", g.bytes}, {"per_batch_item", g.per_batch_item}, {"allocs", g.allocs}});
  nlohmann::json checks = nlohmann::json::array();
  for (const auto& c : r.checks)
    checks.push_back({{"what", c.what},
                      {"batch", c.batch},
                      {"recorded_peak_reserved", c.recorded_peak},
                      {"predicted_peak_reserved", c.predicted_peak},
                      {"relative_error", c.error()}});
  return {{"schema_version", kJsonSchemaVersion},
          {"command", "fit"},
          {"probes", probes},
          {"alignment",
           {{"exact", al.exact},
            {"reference_allocs", al.reference_allocs},
            {"unmatched_allocs", al.unmatched_allocs},
            {"unmatched_bytes", al.unmatched_bytes},
            {"other_probes_unmatched_allocs", al.others_unmatched_allocs},
            {"notes", al.notes}}},
          {"size_laws", law_counts},
          {"capacity", r.capacity},
          {"capacity_inferred", capacity_note.empty() ? nlohmann::json(nullptr) : nlohmann::json(capacity_note)},
          {"live_limit_batch", r.live_limit_batch},
          {"answers", answers},
          {"growth_batch", r.growth_batch},
          {"growth_by", r.growth_by_site ? "call_site" : "size_class"},
          {"growth", growth},
          {"checks", checks},
          {"confidence", r.confidence},
          {"seconds", r.seconds}};
}

void print_fit(const BatchModel& model, const FitReport& r, const std::string& capacity_note) {
  fmt::print("probes    ");
  for (size_t k = 0; k < model.probes().size(); ++k) {
    const auto& p = model.probes()[k];
    fmt::print("{}{} at batch {} ({} events){}", k ? "\n          " : "", p.name, p.batch, p.trace.events.size(),
               k == model.reference_index() ? ", the reference" : "");
  }
  const auto& al = model.alignment();
  if (al.exact)
    fmt::print(
        "\naligned   exactly: every probe made the same {} allocations, frees and cache releases in the same "
        "order\n",
        al.reference_allocs);
  else
    fmt::print("\naligned   allocation by allocation, {} of the reference's {} without a counterpart ({})\n",
               al.unmatched_allocs, al.reference_allocs, format_size(al.unmatched_bytes));
  for (const auto& n : al.notes) fmt::print("          {}\n", n);
  std::vector<uint64_t> laws = model.law_counts();
  fmt::print("sizes     ");
  for (size_t k = 0; k < laws.size(); ++k)
    fmt::print("{}{} {}", k ? ", " : "", laws[k], size_law_name(static_cast<SizeLaw>(k)));
  fmt::print(" in the batch\ncapacity  {} ({} bytes){}; the live bytes alone fit up to batch {}\n",
             format_size(r.capacity), r.capacity, capacity_note.empty() ? "" : ", " + capacity_note,
             r.live_limit_batch);

  fmt::print("\nlargest batch that fits, by setting:\n");
  for (const auto& s : r.answers) {
    const BatchPoint* at = point_at(s, s.largest_batch);
    const BatchPoint* fail = s.first_failing ? point_at(s, *s.first_failing) : nullptr;
    fmt::print("  {:>6}  {}{}\n", s.largest_batch, conf_label(s),
               s.first_failing && *s.first_failing > r.live_limit_batch && r.live_limit_batch == s.largest_batch &&
                       s.largest_batch >= (1u << 20)
                   ? "  (the search's limit: --max-batch)"
                   : "");
    if (at)
      fmt::print("          predicted peak reserved there {} ({} bytes)\n", format_size(at->peak_reserved),
                 at->peak_reserved);
    if (fail && !fail->fits)
      fmt::print("          batch {} runs out: a {} request at event {} is not served{}\n", fail->batch,
                 format_size(fail->fail_request), fail->fail_event,
                 fail->fail_site.empty() ? "" : ", from " + fail->fail_site);
    else if (s.first_failing && *s.first_failing > r.live_limit_batch)
      fmt::print("          batch {} cannot fit: its live bytes alone exceed the capacity\n", *s.first_failing);
  }

  fmt::print("\npredicted peak reserved by batch ('OOM': the replay runs out):\n  {:>6}", "batch");
  for (const auto& s : r.answers) fmt::print("  {:>22}", s.label.substr(0, 22));
  fmt::print("\n");
  std::vector<uint64_t> batches;
  for (const auto& s : r.answers)
    for (const auto& p : s.points) batches.push_back(p.batch);
  std::sort(batches.begin(), batches.end());
  batches.erase(std::unique(batches.begin(), batches.end()), batches.end());
  for (uint64_t b : batches) {
    fmt::print("  {:>6}", b);
    for (const auto& s : r.answers) {
      const BatchPoint* p = point_at(s, b);
      fmt::print("  {:>22}", !p ? "" : p->fits ? format_size(p->peak_reserved) : "OOM");
    }
    fmt::print("\n");
  }

  fmt::print("\nlive at the live peak at batch {}, by {}: what grows with the batch\n", r.growth_batch,
             r.growth_by_site ? "the line of your code that allocated it" : "size class (no stacks recorded)");
  size_t shown = 0;
  for (const auto& g : r.growth) {
    if (shown++ == 8) {
      fmt::print("    ({} more: --json)\n", r.growth.size() - 8);
      break;
    }
    fmt::print("    {:>10}  {:>12} per batch item  {:>6} allocs  {}\n", format_size(g.bytes),
               (g.per_batch_item < 0 ? "-" : "+") +
                   format_size(static_cast<uint64_t>(g.per_batch_item < 0 ? -g.per_batch_item : g.per_batch_item)),
               g.allocs, g.key);
  }
  if (!r.checks.empty()) fmt::print("\nchecks\n");
  for (const auto& c : r.checks)
    fmt::print("  {}: predicted peak reserved {}, recorded {} ({:+.2f}%)\n", c.what, format_size(c.predicted_peak),
               format_size(c.recorded_peak), 100.0 * c.error());
  fmt::print("\nconfidence: {}\n", r.confidence);
}

}  // namespace fraglab::cli
