#!/usr/bin/env bash
# Regenerates the screenshots docs/gui.md shows, with fraglab-gui's headless screenshot
# mode under Xvfb. Usage: scripts/gui-screenshots.sh [path/to/fraglab-gui]
set -euo pipefail
cd "$(dirname "$0")/.."
gui=${1:-build/gui/fraglab-gui}
policy=${FRAGLAB_SHOT_POLICY:-pytorch}
corpus=traces/corpus
shot() { xvfb-run -a -s "-screen 0 1920x1200x24" "$gui" "$@" --width 1400 --height 860; }
shot "$corpus/gpt2_train.default.pickle.gz" --policy "$policy" --at peak \
  --screenshot docs/img/gui_gpt2_peak.png
shot "$corpus/bert_varlen_train.default.pickle.gz" --policy "$policy" --policy "$policy:expandable_segments:True" \
  --at peak --view compare --screenshot docs/img/gui_bert_compare.png
shot "$corpus/gpt2_train.default.stacks.pickle.gz" --policy "$policy" --at peak --color site \
  --screenshot docs/img/gui_gpt2_stacks_sites.png
ls -la docs/img/gui_*.png
