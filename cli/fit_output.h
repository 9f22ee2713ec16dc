// How `fraglab fit` and `fraglab diagnose --probe` show the batch what-if (report/batch_fit.h): text and
// JSON, one shape for both commands.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/command_json.h"
#include "report/batch_fit.h"

namespace fraglab::cli {

// Loads PATH@BATCH probes into a model (throws FormatError / std::invalid_argument).
BatchModel load_batch_model(const std::vector<std::string>& args, int trace_device);
nlohmann::json fit_json(const BatchModel& model, const FitReport& r, const std::string& capacity_note);
void print_fit(const BatchModel& model, const FitReport& r, const std::string& capacity_note);
// One sentence: the largest batch under each setting.
std::string fit_sentence(const FitReport& r);

}  // namespace fraglab::cli
