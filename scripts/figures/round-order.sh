# Sourced by the A/B and figure scripts (not run).
#
# median: the median of the numbers on standard input, one per line.
median() { sort -n | awk 'NF {a[++n]=$1} END {print a[int((n+1)/2)]}'; }

# round_order ROUND
# ITEM... prints the items one per line, in reverse in even rounds: a run
# right after one of the same kind tends to be faster on this machine (one
# binary run twice in a row gave 6-14% more the second time), so a fixed
# order would favour the items that run later.
round_order() {
  local r=$1
  shift
  if (($# > 0 && r % 2 == 0)); then
    for ((i = $#; i >= 1; i--)); do printf '%s\n' "${!i}"; done
  else
    printf '%s\n' "$@"
  fi
}
