// The self-contained HTML page of `fraglab diagnose --html`: per OOM (or peak) the numbers and
// the block map at that moment as inline SVG (segments as rows, live blocks coloured by call
// site or size class, free ranges white, segments that could have served the request framed).
#pragma once

#include <string>

#include "report/diagnose.h"

namespace fraglab {

// The page's head (doctype, title, the shared style) up to and including <body>: the other HTML reports
// (`fraglab ranks --html`) look the same.
std::string html_page_head(const std::string& title);

std::string diagnose_html(const DiagnoseReport& report, const Trace& trace, const std::string& command);

}  // namespace fraglab
