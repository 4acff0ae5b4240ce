#!/usr/bin/env bash
# The course on a CUDA machine, in one go: what a maintainer runs when a GPU is at hand.
#
#   bash benchmarks/cuda_check.sh OUT_DIR NANOGPT_CHECKOUT
#
# Run from the repository root, with a Python that has PyTorch with CUDA and the course's
# dependencies ($PYTHON, default python3; the checkout is put on PYTHONPATH). Each step has a
# time limit and writes its log (and JSON) under OUT_DIR, so that one step's failure or timeout
# leaves the others' results:
#
#   env       the GPU, the driver and PyTorch's view of them
#   race      the nanoGPT race on the GPU, bfloat16 autocast on both sides: nanoGPT's own
#             train.py against the course's fast, speedrun, modern and baseline recipes, two
#             seeds each (benchmarks/nanogpt_race.py; race_cuda.json)
#   tests     pytest of course_lib, benchmarks and tests (no notebooks, website or browser),
#             where course_lib.get_device() is CUDA: the conformance suite, the CUDA-only tests
#             (bitsandbytes' kernels, the fused encoder on CUDA) and every benchmark's quick run
#             with its GPU rows
#   encoder   chapter 9's encoder before and after fusing, against BertModel, on the GPU
#             (python -m benchmarks.bert_encoder --device cuda)
#   compiled  the race again with torch.compile on both sides (race_cuda_compiled.json)
#   profile   one training step of the race model (baseline, fast) under torch.profiler: the
#             top kernels, the launch count, ms/step with the race's and the fused optimiser
#             (python -m benchmarks.gpt_scale --profile-only; profile.json)
#   scale     GPT-2 small (124M), the course's model and nanoGPT's, bfloat16, fused AdamW,
#             eager: tokens/s, ms/step, MFU against the measured matmul peak and the vendor's
#             (python -m benchmarks.gpt_scale; scale_eager.json)
#   scalec    the same compiled (torch.compile on both; scale_compiled.json, compile seconds)
#
# STEPS="race encoder" runs only those steps (issue 46's device call: STEPS="env profile scale
# scalec race compiled", about 8 minutes); RACE_S, TESTS_S, ENCODER_S, COMPILED_S, PROFILE_S,
# SCALE_S and SCALEC_S change their time limits (seconds), WORKERS the number of pytest
# workers, SCALE_BATCH the sequences of 1024 tokens per micro-batch (16).
set -u
out=${1:?usage: bash benchmarks/cuda_check.sh OUT_DIR NANOGPT_CHECKOUT}
nanogpt=${2:?usage: bash benchmarks/cuda_check.sh OUT_DIR NANOGPT_CHECKOUT}
py=${PYTHON:-python3}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

step() {  # step NAME SECONDS COMMAND...: run it under a time limit, log to OUT_DIR/NAME.log
    local name=$1 limit=$2 start rc
    shift 2
    case " ${STEPS:-env race tests encoder compiled profile scale scalec} " in *" $name "*) ;; *) return 0 ;; esac
    echo "== $name (limit ${limit} s): $*"
    start=$(date +%s)
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    rc=$?
    echo "   exit $rc after $(($(date +%s) - start)) s"
    tail -n "${TAIL:-30}" "$out/$name.log"
}

step env 60 bash -c "nvidia-smi; $py -c 'import torch; print(torch.__version__, torch.version.cuda, \
torch.cuda.get_device_name(), torch.cuda.get_device_capability())'"
step race "${RACE_S:-150}" "$py" -m benchmarks.nanogpt_race --nanogpt "$nanogpt" --device cuda \
    --autocast bfloat16 --threads 4 --seeds 0 1 --recipes fast speedrun modern baseline \
    --out "$out/race_cuda.json"
TAIL=60 step tests "${TESTS_S:-200}" "$py" -m pytest -o addopts= -p no:cacheprovider \
    --doctest-modules -q -rfE -n "${WORKERS:-12}" -m "not book and not browser and not lab" \
    --continue-on-collection-errors --junitxml="$out/tests.xml" course_lib benchmarks tests
step encoder "${ENCODER_S:-90}" "$py" -m benchmarks.bert_encoder --device cuda
step compiled "${COMPILED_S:-150}" "$py" -m benchmarks.nanogpt_race --nanogpt "$nanogpt" \
    --device cuda --autocast bfloat16 --compile --threads 4 --seeds 0 1 --recipes fast modern \
    --out "$out/race_cuda_compiled.json"
step profile "${PROFILE_S:-60}" "$py" -m benchmarks.gpt_scale --device cuda --profile-only \
    --threads 4 --out "$out/profile.json"
step scale "${SCALE_S:-120}" "$py" -m benchmarks.gpt_scale --device cuda --nanogpt "$nanogpt" \
    --modes eager --batch "${SCALE_BATCH:-16}" --steps 20 --warmup 3 --out "$out/scale_eager.json"
step scalec "${SCALEC_S:-180}" "$py" -m benchmarks.gpt_scale --device cuda --nanogpt "$nanogpt" \
    --modes compiled --batch "${SCALE_BATCH:-16}" --steps 20 --warmup 3 \
    --out "$out/scale_compiled.json"
