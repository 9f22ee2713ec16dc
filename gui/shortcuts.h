// fraglab-gui's keyboard shortcuts: one table that both the key handling (frame.cpp) and
// the help view read, so the help cannot drift from what the keys do.
#pragma once

namespace fraglab::gui {

struct Shortcut {
  const char* keys;
  const char* action;
};

constexpr Shortcut kShortcuts[] = {
    {"Left / Right", "previous / next event (Shift: 100, Ctrl: 10000)"},
    {"Home / End", "first / last event"},
    {"P", "jump to the peak of reserved memory"},
    {"O / Shift+O", "next / previous out-of-memory event"},
    {"S / Shift+S", "next / previous segment allocation or page mapping"},
    {"[ / ]", "show the previous / next policy in the timeline and block map"},
    {"C", "cycle colors: size class, age, allocation site, pool, stream"},
    {"T", "timeline axis: event index or time"},
    {"= / -", "zoom the timeline in / out around the cursor"},
    {"Z", "show the whole trace"},
    {"1 .. 9",
     "the views, in tab order: block map, active memory, events, OOMs, compare, summary, help, settings, pools"},
    {"Up / Down", "events view: previous / next event (with 'matches only': previous / next match)"},
    {"F1", "this help"},
    {"Ctrl+L", "edit the trace path"},
};

}  // namespace fraglab::gui
