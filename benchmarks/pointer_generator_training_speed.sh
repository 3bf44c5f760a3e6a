#!/usr/bin/env bash
# 30 + 5 coverage steps of the pointer-generator's SciTLDR config, one thread, small validations, at two
# commits side by side (issue 52 item 3). Each side runs from its own worktree with this checkout's venv;
# GNU time reports wall and CPU seconds; the rounds alternate which commit goes first, and the summary
# compares CPU time (user + sys), which a loaded machine disturbs far less than wall time. The schedule is matched on both sides: one coverage run, no
# averaging, PyTorch initialisation, Adagrad state carried into the coverage phase (the older commit's only
# behaviour).
#   bash benchmarks/pointer_generator_training_speed.sh c96981f HEAD [rounds]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
data=${SYNOPSIS_SHARED_DATA:-$root/../shared/data}
rounds=${3:-2}
common="schedule.max_steps=30 schedule.coverage_steps=5 schedule.eval_every=30 schedule.save_every=30
schedule.log_every=10 data.max_dev_examples=16 data.path=$data/scitldr schedule.coverage_runs=1
schedule.average_last=1 schedule.combine_runs=mean model.init=pytorch"
work=$(mktemp -d)
for commit in "$1" "$2"; do git -C "$root" worktree add -q --detach "$work/$commit" "$commit"; done
times=$work/times
for round in $(seq "$rounds"); do
  order="$1 $2"; [ $((round % 2)) -eq 0 ] && order="$2 $1"
  for commit in $order; do
    sets=""; for kv in $common; do sets="$sets --set $kv"; done
    # the older schema has no coverage_optimizer (it always carried the state)
    grep -q coverage_optimizer "$work/$commit/src/synopsis/training/pointer_generator/config.py" \
      && sets="$sets --set schedule.coverage_optimizer=carry"
    echo -n "round $round $commit: load $(cut -d' ' -f1 /proc/loadavg); "
    (cd "$work/$commit" && OMP_NUM_THREADS=1 PYTHONPATH="$work/$commit/src" \
      /usr/bin/time -o "$times.$commit.$round" -f "%e s wall, %U s user, %S s sys" \
      python -m synopsis train pointer-generator -c configs/pointer_generator_scitldr.yaml \
      -o "$work/run-$commit-$round" --threads 1 -q $sets)
    cat "$times.$commit.$round"
  done
done
for commit in "$1" "$2"; do  # median CPU seconds (user + sys) over the rounds
  cpu=$(cat "$times.$commit".* | awk '{print $4 + $7}' | sort -n \
    | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}')
  echo "$commit: median CPU ${cpu} s over $rounds rounds (each: $(cat "$times.$commit".* | awk '{printf "%s ", $4 + $7}'))"
done
for commit in "$1" "$2"; do git -C "$root" worktree remove --force "$work/$commit"; done
