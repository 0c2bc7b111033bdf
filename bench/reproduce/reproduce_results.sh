#!/usr/bin/env bash
# Do the trained-model numbers in RESULTS.md reproduce? Runs every one, one run after another (about
# 2 h 50 min on 2 CPU cores; run nothing else meanwhile: the wall times in RESULTS.md were measured on a
# quiet machine).
#
#   SCRATCHFORMER_DATA=../shared/data bash bench/reproduce/reproduce_results.sh [NAME ...]
#
# NAME: copy reverse sort shakespeare-char shakespeare-char-large shakespeare-char-modern multi30k multi30k-modern
# sst2 sst2-minilm digits-vit (default:
# all; digits-vit needs the images extra, and also runs its baseline, bench/baselines/digits_baseline.py).
# Each run goes to runs/NAME (checkpoints, metrics.jsonl, TensorBoard) with its console log in
# runs/NAME.log and `scratchformer evaluate` of its best checkpoint in runs/NAME.eval.json; then
# bench/reproduce/results_artifacts.py copies the small files and draws the plots into results/.
set -euo pipefail
cd "$(dirname "$0")/../.."
export SCRATCHFORMER_DATA="${SCRATCHFORMER_DATA:-../shared/data}"
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(copy reverse sort shakespeare-char shakespeare-char-large shakespeare-char-modern
                                 multi30k multi30k-modern sst2 sst2-minilm digits-vit)
mkdir -p runs
for name in "${names[@]}"; do
    if [ -e "runs/$name" ]; then echo "runs/$name exists: move it away to run $name again" >&2; exit 1; fi
    start=$(date +%s)
    scratchformer train --preset "$name" --out "runs/$name" 2>&1 | tee "runs/$name.log"
    echo "wall time: $(( $(date +%s) - start )) s" | tee -a "runs/$name.log"
    if [[ "$name" != shakespeare-char* ]]; then
        scratchformer evaluate --ckpt "runs/$name" > "runs/$name.eval.json"
    else
        scratchformer evaluate --ckpt "runs/$name" --split val > "runs/$name.eval.json"
    fi
    if [ "$name" = "digits-vit" ]; then
        python bench/baselines/digits_baseline.py > runs/digits-baseline.txt
    fi
done
python bench/reproduce/results_artifacts.py "${names[@]}"

# Ensembles: seeds 1 and 2 of each SST-2 preset, side by side (one thread each, so about as long as one
# run), then `scratchformer evaluate` of the three seeds voting together (seed 0 is runs/NAME).
for name in "${names[@]}"; do
    case "$name" in sst2|sst2-minilm) ;; *) continue ;; esac
    for seed in 1 2; do
        scratchformer train --preset "$name" seed=$seed num_threads=1 --out "runs/$name-seed$seed" \
            > "runs/$name-seed$seed.log" 2>&1 &
    done
    wait
    scratchformer evaluate --ckpt "runs/$name" "runs/$name-seed1" "runs/$name-seed2" > "runs/$name-ensemble.eval.json"
done
