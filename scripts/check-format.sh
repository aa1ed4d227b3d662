#!/usr/bin/env bash
# Fails (exit 1) when a tracked C++ file differs from the committed .clang-format, naming each one;
# vendored headers (third_party/) are left as their authors wrote them. Fix with
#   clang-format -i FILE
# CI runs it from scripts/test.sh (Debian 12's clang-format 14, installed by scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format > /dev/null || { echo "check-format: clang-format not installed" >&2; exit 2; }
bad=()
while IFS= read -r f; do
  clang-format --dry-run --Werror "$f" > /dev/null 2>&1 || bad+=("$f")
done < <(git ls-files '*.cc' '*.h' '*.cpp' '*.hpp' '*.cu' | grep -v '/third_party/')
if [[ ${#bad[@]} -gt 0 ]]; then
  echo "check-format: ${#bad[@]} file(s) differ from .clang-format (clang-format -i FILE):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check-format: every C++ file matches .clang-format"
