#!/usr/bin/env bash
# Regenerates the screenshots docs/gui.md shows, with fraglab-gui's headless screenshot
# mode under Xvfb. Usage: scripts/gui-screenshots.sh [path/to/fraglab-gui]
set -euo pipefail
cd "$(dirname "$0")/.."
gui=${1:-build/gui/fraglab-gui}
policy=${FRAGLAB_SHOT_POLICY:-pytorch}
corpus=traces/corpus
cases=tests/data/snapshots
shot() { xvfb-run -a -s "-screen 0 1920x1200x24" "$gui" "$@" --width 1400 --height 860; }
shot "$corpus/gpt2_train.default.pickle.gz" --policy "$policy" --at peak \
  --screenshot docs/img/gui_gpt2_peak.png
shot "$corpus/bert_varlen_train.default.pickle.gz" --policy "$policy" --policy "$policy:expandable_segments:True" \
  --at peak --view compare --screenshot docs/img/gui_bert_compare.png
shot "$corpus/gpt2_train.default.stacks.pickle.gz" --policy "$policy" --at peak --color site \
  --screenshot docs/img/gui_gpt2_stacks_sites.png
# The recording itself: PyTorch's own blocks, then every allocation over time.
shot "$cases/graphs_two_pools.default.pickle.gz" --policy recorded --policy "$policy" --at peak --color pool \
  --screenshot docs/img/gui_recorded_pools.png
shot "$corpus/gpt2_train.default.stacks.pickle.gz" --policy recorded --view memory --at peak --color site \
  --screenshot docs/img/gui_memory_sites.png
shot "$corpus/gpt2_train.default.stacks.pickle.gz" --policy recorded --view events --at peak \
  --search "action:alloc size:512MiB.. forward" --screenshot docs/img/gui_events_search.png
shot "$cases/gpt2_oom_backoff.default_cap0.12.stacks.pickle.gz" --policy recorded --view oom --at oom \
  --screenshot docs/img/gui_oom.png
shot "$corpus/gpt2_train.default.pickle.gz" "$corpus/gpt2_train.expandable.pickle.gz" --policy "$policy" \
  --view compare --align step --at peak --screenshot docs/img/gui_two_traces.png
ls -la docs/img/gui_*.png
shot "$corpus/gpt2_train.default.stacks.pickle.gz" --policy "$policy" --at peak --color category \
  --screenshot docs/img/gui_gpt2_categories.png
fit=tests/data/fit
shot "$fit/kv_server.b37.default_cap0.0451.pickle.gz" --view oom --probe "$fit/kv_server.b2.default.pickle.gz@2" \
  --probe "$fit/kv_server.b4.default.pickle.gz@4" --probe "$fit/kv_server.b6.default.pickle.gz@6" \
  --screenshot docs/img/gui_kv_oom_probes.png
# The views MemoryViz has: allocator settings, private pools, the cached-segment timeline.
shot "$cases/varlen_transformer_train.expandable_segments-True_max_split_size_mb-64_left3.pickle.gz" --policy recorded \
  --view settings --at peak --screenshot docs/img/gui_settings.png
shot "$cases/graphs_two_pools.default.pickle.gz" --policy recorded --view pools --at peak --color pool \
  --screenshot docs/img/gui_pools.png
shot "$cases/resnet50_train.default_empty2.pickle.gz" --policy recorded --view segments --at peak \
  --screenshot docs/img/gui_segments.png
