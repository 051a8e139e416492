#!/usr/bin/env bash
# `make demo`: an offline, end-to-end walk through everything ftmanifest can do
# on the shipped example manifests, showing passes and refusals.
# Works in demo-out/ (git-ignored); safe to run again.  Each command shows its
# verdict and the last line of its output (`--verbose`, or VERBOSE=1 make demo,
# shows all of it); all of it is in demo-out/demo.log.
set -u
cd "$(dirname "$0")/.."
# output in the order a terminal shows it (stdout is not buffered apart from stderr)
export PYTHONUNBUFFERED=1
# tables as wide as in the tutorial, whatever the terminal (demo.log is read in an editor)
export COLUMNS=100
OUT=demo-out
rm -rf "$OUT"
mkdir -p "$OUT"
FAILED=0
VERBOSE=${VERBOSE:-0}
[ "${1:-}" = "--verbose" ] && VERBOSE=1
FULL="$PWD/$OUT/demo.log"
: > "$FULL"

now() { date +%s.%N; }
STEP_T=""
took() {  # the previous step's wall time
  [ -n "$STEP_T" ] && awk -v a="$STEP_T" -v b="$(now)" 'BEGIN { printf "   (%.1f s)\n", b - a }'
  STEP_T=$(now)
}
step() { took; printf '\033[1m== %s\033[0m\n' "$*"; printf '\n== %s\n' "$*" >> "$FULL"; }
# show LOG: a command's output in full with --verbose, else nothing (judge prints its
# last line); always kept whole in demo.log.
show() {
  cat "$1" >> "$FULL"
  if [ "$VERBOSE" = 1 ]; then cat "$1"; fi
}
# expect CODE CMD...: run CMD, show its output, and check its exit code; a Python
# traceback fails the step whatever the code (a crash is never a refusal).
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
expect() {
  local want=$1; shift
  printf '$ %s\n' "$*" | tee -a "$FULL"
  "$@" > "$LOG" 2>&1
  local got=$?
  show "$LOG"
  judge "$want" "$got" "$LOG"
}
# judge WANT GOT LOG...: the verdict on one command from its exit code and its output.
# Without --verbose the verdict line ends with the output's last line; a failed step
# shows the end of its output whatever the mode.
judge() {
  local want=$1 got=$2 last=""; shift 2
  if [ "$VERBOSE" != 1 ]; then
    last=$(cat "$@" | grep -v '^[[:space:]]*$' | tail -n 1 | cut -c 1-100)
    [ -n "$last" ] && last=": $last"
  fi
  if cat "$@" | grep -q "Traceback (most recent call last)"; then
    [ "$VERBOSE" = 1 ] || cat "$@" | tail -n 30
    printf '   -> exit %s with a traceback: DEMO FAILED\n' "$got"
    FAILED=1
  elif [ "$got" -eq "$want" ]; then
    printf '   -> exit %s (as expected)%s\n' "$got" "$last"
  else
    [ "$VERBOSE" = 1 ] || cat "$@" | tail -n 30
    printf '   -> exit %s, expected %s: DEMO FAILED\n' "$got" "$want"
    FAILED=1
  fi
}

step "version"
expect 0 ftmanifest --version

step "1. lint: the shipped manifests are fully pinned (pass)"
expect 0 ftmanifest lint manifests/*.yaml

step "2. lint: a manifest that trains on a branch, not a commit (refused, exit 1)"
sed 's/^  revision: .*/  revision: main/' manifests/docroute-lora-r16.yaml > "$OUT/on-main.yaml"
expect 1 ftmanifest lint "$OUT/on-main.yaml"

step "3. lint: a misspelt field (unusable, exit 2, with a did-you-mean)"
sed 's/^  seq_len:/  seq_length:/' manifests/docroute-lora-r16.yaml > "$OUT/typo.yaml"
expect 2 ftmanifest lint "$OUT/typo.yaml"

step "4. init: a template that lint rejects until it is filled in"
expect 0 ftmanifest init "$OUT/new-experiment.yaml"
expect 1 ftmanifest lint "$OUT/new-experiment.yaml"

step "5. digest: comments do not change the canonical digest; values do"
expect 0 ftmanifest digest manifests/docroute-lora-r16.yaml
sed 's/# every department, not one global average/# (comment edited)/' \
  manifests/docroute-lora-r16.yaml > "$OUT/comment-edit.yaml"
expect 0 ftmanifest digest "$OUT/comment-edit.yaml"
sed 's/max_drop: 0.02/max_drop: 0.05/' manifests/docroute-lora-r16.yaml > "$OUT/value-edit.yaml"
expect 0 ftmanifest digest "$OUT/value-edit.yaml"

step "6. schema: generated from the model, identical to the committed file"
ftmanifest schema > "$OUT/schema.json"
expect 0 cmp "$OUT/schema.json" schema/ftmanifest.schema.json

step "7. signing: keygen, sign, check trust; a tampered manifest is refused"
mkdir -p "$OUT/signed/.ftmanifest"
( cd "$OUT/signed" && git init -q . )
cp manifests/docroute-lora-r16.yaml "$OUT/signed/exp.yaml"
expect 0 ftmanifest keygen -f "$OUT/keys/alice" --no-passphrase --comment alice@example.org
cd "$OUT/signed" && expect 0 ftmanifest trust add ../keys/alice.pub --principal alice@example.org
cd - > /dev/null
expect 0 ftmanifest sign "$OUT/signed/exp.yaml" --key "$OUT/keys/alice"
expect 0 ftmanifest signers "$OUT/signed/exp.yaml"
sed -i 's/max_steps: 1200/max_steps: 1300/' "$OUT/signed/exp.yaml"
expect 1 ftmanifest signers "$OUT/signed/exp.yaml"

step "8. scan: a clean data set passes; a leaked token, personal data and a malicious pickle are found"
mkdir -p "$OUT/data-clean" "$OUT/data-leaky"
python - "$OUT" <<'PY'
import json, pickle, random, string, sys
out = sys.argv[1]
rows = [{"messages": [{"role": "user", "content": f"Where is parcel {i}?"},
                      {"role": "assistant", "content": "shipping"}]} for i in range(50)]
with open(f"{out}/data-clean/train.jsonl", "w") as fh:
    fh.writelines(json.dumps(r) + "\n" for r in rows)
# A made-up token in GitHub's format, generated here so no secret is committed.
rnd = random.Random(7)
token = "ghp_" + "".join(rnd.choice(string.ascii_letters + string.digits) for _ in range(36))
# (an address at a real-looking domain: example.com/.org are documentation domains
# the scanner ignores on purpose)
rows[3]["messages"][0]["content"] = f"my token is {token}, mail me at jane.doe@mailbox.org"
with open(f"{out}/data-leaky/train.jsonl", "w") as fh:
    fh.writelines(json.dumps(r) + "\n" for r in rows)

class Payload:  # what a booby-trapped checkpoint does: run a command when loaded
    def __reduce__(self):
        import os
        return (os.system, ("echo owned",))

with open(f"{out}/data-leaky/pytorch_model.bin", "wb") as fh:
    pickle.dump({"weight": Payload()}, fh)
# The same payload as a gzip'd protocol-0 pickle under a harmless name: it reads
# like text, and a loader that inflates it still runs the command.
import gzip
with open(f"{out}/data-leaky/optimizer.txt.gz", "wb") as fh:
    fh.write(gzip.compress(pickle.dumps({"state": Payload()}, protocol=0)))
# Personal data in the forms people write: a grouped card number with no card
# word, a national-format phone number, escaped inside a JSON string.
digits = [4] + [rnd.randrange(10) for _ in range(14)]
check = (10 - sum(d if i % 2 else (2 * d - 9 if 2 * d > 9 else 2 * d)
                  for i, d in enumerate(reversed(digits))) % 10) % 10
card = "".join(map(str, digits + [check]))
card = " ".join(card[i:i + 4] for i in range(0, 16, 4))
row = {"text": f"Paid with {card}.\nCall me: (505) 658-5596"}
with open(f"{out}/data-leaky/support.jsonl", "w") as fh:
    fh.write(json.dumps(row) + "\n")
PY
expect 0 ftmanifest scan "$OUT/data-clean"
expect 1 ftmanifest scan "$OUT/data-leaky"

step "9. the tiny example: build a real model and data set offline, then lock it"
python -c "from ftmanifest.examples.project import build_example; print(build_example(__import__('pathlib').Path('$OUT/tiny')))"
mkdir -p "$OUT/tiny/.ftmanifest"
cp "$OUT/signed/.ftmanifest/allowed_signers" "$OUT/tiny/.ftmanifest/allowed_signers"
# The example is its own training repository: lock pins its commit.
GIT="git -c user.name=demo -c user.email=demo@example.org -c commit.gpgsign=false"
# Its training script is part of it, as in the README: the guard judges the script that
# trains against the pinned commit, as it judges every other file the process imports.
cp manifests/train_tiny.py "$OUT/tiny/train_tiny.py"
printf 'out/\n*.runs.jsonl\n' > "$OUT/tiny/.gitignore"
( cd "$OUT/tiny" && git init -q . && $GIT add -A && $GIT commit -qm "tiny example" )
expect 1 ftmanifest lint "$OUT/tiny/manifest.yaml"
printf '$ ftmanifest lock --dry-run %s | head -8\n' "$OUT/tiny/manifest.yaml" | tee -a "$FULL"
ftmanifest lock --dry-run "$OUT/tiny/manifest.yaml" > "$LOG" 2>&1
cat "$LOG" >> "$FULL"
head -n 8 "$LOG"
expect 0 ftmanifest lock "$OUT/tiny/manifest.yaml"
expect 0 ftmanifest lint "$OUT/tiny/manifest.yaml"

step "9a. init --from: a manifest derived from what you already have (TrainingArguments JSON, a LoRA config, the model folder, the data); lint names what is left to decide"
python - "$OUT" <<'PY' 2>/dev/null
import sys
from pathlib import Path
from peft import LoraConfig
from transformers import TrainingArguments
out = Path(sys.argv[1])
args = TrainingArguments(output_dir="out", learning_rate=2e-4, per_device_train_batch_size=4,
                         max_steps=30, seed=7, report_to=[])
(out / "args.json").write_text(args.to_json_string())
LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"],
           task_type="CAUSAL_LM").save_pretrained(out / "lora-config")
PY
expect 0 ftmanifest init "$OUT/from.yaml" --from "$OUT/args.json" \
  "$OUT/lora-config/adapter_config.json" "$OUT/tiny/model" "$OUT/tiny/data/train.jsonl" \
  "$OUT/tiny/data/eval.jsonl" "$OUT/tiny/data/test.jsonl"
expect 1 ftmanifest lint "$OUT/from.yaml"

step "10. verify: unsigned is refused; signed and unchanged passes"
expect 1 ftmanifest verify "$OUT/tiny/manifest.yaml"
expect 0 ftmanifest sign "$OUT/tiny/manifest.yaml" --key "$OUT/keys/alice"
expect 0 ftmanifest verify "$OUT/tiny/manifest.yaml"

step "10b. commit the locked, signed manifest: HEAD moved, but only the manifest's own files changed"
( cd "$OUT/tiny" && $GIT add manifest.yaml manifest.yaml.sig.json && $GIT commit -qm "lock and sign" )
expect 0 ftmanifest verify "$OUT/tiny/manifest.yaml"

step "11. a real transformers Trainer runs under the guard"
expect 0 python "$OUT/tiny/train_tiny.py" "$OUT/tiny/manifest.yaml"

step "11b. the guard checks the model it is handed: a copy from another folder is refused"
cp -r "$OUT/tiny/model" "$OUT/model-copy"
expect 1 python "$OUT/tiny/train_tiny.py" "$OUT/tiny/manifest.yaml" --model-from "$OUT/model-copy"

step "11b2. the guard compares the recipe the Trainer runs: a script's own seed and batch size are refused before step 1; the arguments built from the manifest (training_arguments) train"
expect 1 python "$OUT/tiny/train_tiny.py" "$OUT/tiny/manifest.yaml" \
  --own-args seed=42,per_device_train_batch_size=8
expect 0 python "$OUT/tiny/train_tiny.py" "$OUT/tiny/manifest.yaml"
# what the model was fed: the guard recorded the Trainer's first batches in the run record
expect 0 ftmanifest data sample "$OUT/tiny/manifest.yaml" --from-run "$OUT/tiny/out/ftmanifest-run.json"

step "11c. run supervises the command: shell exit codes, signals passed on, every run recorded; a command whose Python run cannot tell is refused unless its guard reports"
expect 127 ftmanifest run "$OUT/tiny/manifest.yaml" -- no-such-command
# a shell string may start any interpreter: refused, unless the guard inside it reports
expect 1 ftmanifest run "$OUT/tiny/manifest.yaml" -- sh -c "python $OUT/tiny/train_tiny.py \"\$0\"" \
  "$OUT/tiny/manifest.yaml"
expect 0 ftmanifest run "$OUT/tiny/manifest.yaml" --guarded -- \
  sh -c "python $OUT/tiny/train_tiny.py \"\$0\"" "$OUT/tiny/manifest.yaml"
expect 143 ftmanifest run "$OUT/tiny/manifest.yaml" --guarded -- sh -c 'kill -TERM $$'
expect 0 ftmanifest run "$OUT/tiny/manifest.yaml" --grace 5 -- python -c '
import os, signal, sys, time
def checkpoint(signum, frame):
    print("child: SIGTERM received, checkpointing before exit"); sys.exit(0)
signal.signal(signal.SIGTERM, checkpoint)
os.kill(os.getppid(), signal.SIGTERM)  # as if the scheduler preempted the job
time.sleep(30)'
# what happened to the experiment: its run records, not its signed manifest
expect 0 ftmanifest runs "$OUT/tiny/manifest.yaml"

step "11d. verify refuses what only lint used to flag: a package pinned to a range"
sed 's/^    torch: .*/    torch: ">=2"/' "$OUT/tiny/manifest.yaml" > "$OUT/tiny/loose-pin.yaml"
expect 1 ftmanifest verify "$OUT/tiny/loose-pin.yaml" --no-signature
rm "$OUT/tiny/loose-pin.yaml"  # an untracked file would make the training code dirty

step "12. one changed byte in the training data: verify, run and the Trainer all refuse"
python - "$OUT/tiny/data/train.jsonl" <<'PY'
import sys
p = sys.argv[1]
data = bytearray(open(p, "rb").read())
data[data.index(b"department")] = ord("D")
open(p, "wb").write(bytes(data))
PY
expect 1 ftmanifest verify "$OUT/tiny/manifest.yaml"
expect 1 ftmanifest run "$OUT/tiny/manifest.yaml" -- echo "this must not run"
expect 1 python "$OUT/tiny/train_tiny.py" "$OUT/tiny/manifest.yaml"
expect 2 ftmanifest verify "$OUT/tiny/manifest.yaml" --accept data --reason "a whole section"
expect 0 ftmanifest verify "$OUT/tiny/manifest.yaml" --accept 'data[0]' \
  --reason "demo: relabelled one record on purpose"

step "13. what happened to an experiment is recorded beside it; the signed manifest stays as signed"
expect 0 ftmanifest runs "$OUT/tiny/manifest.yaml" --mark abandoned \
  --reason "demo: the training data was edited by hand"
expect 0 ftmanifest signers "$OUT/tiny/manifest.yaml"
sed 's/^  id: \(.*\)$/  id: \1\n  status: abandoned/' "$OUT/tiny/manifest.yaml" > "$OUT/status-in-manifest.yaml"
expect 2 ftmanifest lint "$OUT/status-in-manifest.yaml"

step "14. bind: a LoRA adapter trained on the tiny model is bound to that base; another base is refused"
python - "$OUT/tiny" <<'PY'
import sys, pathlib
tiny = pathlib.Path(sys.argv[1])
text = (tiny / "manifest.yaml").read_text()
lora = ("method:\n  kind: lora\n  r: 4\n  alpha: 8\n  target_modules: [q_proj, v_proj]\n\n"
        "export:\n  path: out/adapter\n  kind: adapter\n")
assert "method:\n  kind: full\n" in text
(tiny / "lora.yaml").write_text(text.replace("method:\n  kind: full\n", lora).replace(
    "id: docroute-tiny", "id: docroute-tiny-lora"))
PY
( cd "$OUT/tiny" && $GIT add lora.yaml && $GIT commit -qm "a LoRA variant" )
expect 0 ftmanifest lock "$OUT/tiny/lora.yaml"
expect 0 ftmanifest sign "$OUT/tiny/lora.yaml" --key "$OUT/keys/alice"
( cd "$OUT/tiny" && $GIT add lora.yaml lora.yaml.sig.json && $GIT commit -qm "lock and sign the variant" )
expect 0 python manifests/lora_tiny.py "$OUT/tiny/lora.yaml" "$OUT/tiny/out/adapter"
expect 0 ftmanifest bind "$OUT/tiny/out/adapter" --manifest "$OUT/tiny/lora.yaml" --key "$OUT/keys/alice"
expect 0 ftmanifest check-adapter "$OUT/tiny/out/adapter" --manifest "$OUT/tiny/lora.yaml"
python -c "from pathlib import Path; from ftmanifest.examples.tiny import build_model; build_model(Path('$OUT/other-base'), seed=1)"
expect 1 ftmanifest check-adapter "$OUT/tiny/out/adapter" --base "$OUT/other-base"

step "14b. hand-offs the ecosystem verifies: an ECDSA P-256 key's bind also writes model.sig, which OpenSSF model_signing verifies and refuses once a byte changes; lock verifies a publisher's model.sig against the trust file"
expect 0 ftmanifest keygen -f "$OUT/keys/bob" --type ecdsa-p256 --no-passphrase --comment bob@example.org
rm -rf "$OUT/handoff-adapter" && cp -r "$OUT/tiny/out/adapter" "$OUT/handoff-adapter"
expect 0 ftmanifest bind "$OUT/handoff-adapter" --manifest "$OUT/tiny/lora.yaml" --key "$OUT/keys/bob"
expect 0 model_signing verify key "$OUT/handoff-adapter" --signature "$OUT/handoff-adapter/model.sig" \
  --public_key "$OUT/keys/bob.pub.pem"
python - "$OUT/handoff-adapter/adapter_model.safetensors" <<'PY'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
data[-1] ^= 0x01  # one bit of the last weight
open(sys.argv[1], "wb").write(bytes(data))
PY
expect 1 model_signing verify key "$OUT/handoff-adapter" --signature "$OUT/handoff-adapter/model.sig" \
  --public_key "$OUT/keys/bob.pub.pem"
# a base model its publisher signed with model-signing: lock refuses the signature until
# the publisher's key is trusted, then verifies it and records the signer
rm -rf "$OUT/pub" && cp -r "$OUT/tiny" "$OUT/pub"
expect 0 model_signing sign key "$OUT/pub/model" --private_key "$OUT/keys/bob" \
  --signature "$OUT/pub/model/model.sig"
expect 1 ftmanifest lock "$OUT/pub/manifest.yaml"
cd "$OUT/pub" && expect 0 ftmanifest trust add ../keys/bob.pub.pem --principal bob@example.org
cd - > /dev/null
expect 0 ftmanifest lock "$OUT/pub/manifest.yaml"

step "15. score, compare against the guards, audit the run and write the handoff report, model card and ML-BOM"
# Predictions of the untrained base (the baseline) and of the adapter on the eval split
# (made up here: the tiny model is not evaluated), one line per example.
python - "$OUT/tiny" <<'PY'
import json, sys, pathlib
tiny = pathlib.Path(sys.argv[1])
labels = [json.loads(line)["label"] for line in open(tiny / "data" / "eval.jsonl")]
def write(name, wrong):
    with open(tiny / "out" / name, "w") as fh:
        for i, label in enumerate(labels, 1):  # a record without an id is its number
            pred = "account" if i in wrong else label
            fh.write(json.dumps({"id": i, "reference": label, "prediction": pred}) + "\n")
write("baseline.jsonl", wrong={1, 4, 7, 10, 13})
write("candidate.jsonl", wrong={})
write("candidate-worse.jsonl", wrong={i for i, l in enumerate(labels, 1) if l == "billing"})
PY
for name in baseline candidate candidate-worse; do
  expect 0 ftmanifest score --manifest "$OUT/tiny/lora.yaml" --split eval \
    --predictions "$OUT/tiny/out/$name.jsonl"
done
expect 0 ftmanifest compare "$OUT/tiny/lora.yaml" --baseline "$OUT/tiny/out/baseline.results.json" \
  --candidate "$OUT/tiny/out/candidate.results.json" --out "$OUT/tiny/out/comparison.json"
# better on average, but one department drops: refused
expect 1 ftmanifest compare "$OUT/tiny/lora.yaml" --baseline "$OUT/tiny/out/baseline.results.json" \
  --candidate "$OUT/tiny/out/candidate-worse.results.json" --resamples 0
# the adapter was written world-readable: audit refuses, --fix-perms tightens and passes
expect 1 ftmanifest audit "$OUT/tiny/out" --manifest "$OUT/tiny/lora.yaml"
expect 0 ftmanifest audit "$OUT/tiny/out" --manifest "$OUT/tiny/lora.yaml" --fix-perms \
  --limits "demo: predictions are made up; the tiny model is not evaluated"
# the handoff folder holds a Hugging Face model card (README.md); a CycloneDX 1.6 ML-BOM
# of the same manifest and audit; an audit of another manifest is refused
expect 0 ftmanifest export "$OUT/tiny/lora.yaml" --format cyclonedx \
  --audit "$OUT/tiny/out/handoff/handoff.json" --out "$OUT/tiny/out/handoff/bom.cdx.json"
expect 1 ftmanifest export "$OUT/tiny/manifest.yaml" --format cyclonedx \
  --audit "$OUT/tiny/out/handoff/handoff.json"

step "16. encrypted backups: back up the run to the team's keys, check it without a key, restore it; a flipped byte is refused; prune by a retention policy"
TRUST="$OUT/tiny/.ftmanifest/allowed_signers"
# recipients: every ssh-ed25519 key of the team's allowed_signers file (age encrypts to ssh keys)
expect 0 ftmanifest backup create "$OUT/tiny/out" --out "$OUT/backups" --kind run \
  --manifest "$OUT/tiny/lora.yaml" --key "$OUT/keys/alice" -R "$TRUST" --tag demo
expect 0 ftmanifest backup check "$OUT/backups" --trust "$TRUST"
expect 0 ftmanifest backup check "$OUT/backups" --trust "$TRUST" --read-data -i "$OUT/keys/alice"
expect 0 ftmanifest restore "$OUT"/backups/run-*.age -i "$OUT/keys/alice" --out "$OUT/restored" \
  --trust "$TRUST"
diff -r "$OUT/tiny/out" "$OUT/restored/out" && echo "   restored files are identical to the run's"
mkdir -p "$OUT/backups-flipped" && cp "$OUT"/backups/run-* "$OUT/backups-flipped/"
python - "$OUT"/backups-flipped/run-*.age <<'PY'
import sys
with open(sys.argv[1], "r+b") as fh:
    fh.seek(1000)
    byte = fh.read(1)
    fh.seek(1000)
    fh.write(bytes([byte[0] ^ 1]))
print("   flipped one bit at offset 1000 of", sys.argv[1].rsplit("/", 1)[-1])
PY
expect 1 ftmanifest backup check "$OUT/backups-flipped" --trust "$TRUST"
expect 1 ftmanifest restore "$OUT"/backups-flipped/run-*.age -i "$OUT/keys/alice" \
  --out "$OUT/restored-flipped" --trust "$TRUST"
[ ! -e "$OUT/restored-flipped" ] && echo "   nothing was restored from the flipped backup"
# retention: the manifest declares no backup policy, so prune refuses to guess one;
# --keep-last 1 keeps the newest backup of each (experiment, kind) group
sleep 1
expect 0 ftmanifest backup create "$OUT/tiny/out" --out "$OUT/backups" --kind run \
  --manifest "$OUT/tiny/lora.yaml" --key "$OUT/keys/alice" -R "$TRUST"
expect 1 ftmanifest prune "$OUT/backups" --manifest "$OUT/tiny/lora.yaml" --trust "$TRUST"
expect 0 ftmanifest prune "$OUT/backups" --keep-last 1 --trust "$TRUST"
expect 0 ftmanifest prune "$OUT/backups" --keep-last 1 --trust "$TRUST" --apply

step "17. reproduce a signed manifest here; diff and fair variants: what a variant changes, and a change it did not declare"
# reproduce: a colleague's signed manifest on this machine; everything matches here
expect 0 ftmanifest reproduce "$OUT/tiny/lora.yaml" --requirements "$OUT/lora.requirements.txt"
expect 1 ftmanifest diff manifests/docroute-lora-r16.yaml manifests/docroute-lora-r32.yaml
python - "$OUT/tiny" <<'PY'
import sys, pathlib
tiny = pathlib.Path(sys.argv[1])
text = (tiny / "lora.yaml").read_text()
assert "  id: docroute-tiny-lora\n" in text and "seeds:\n  python: 0\n" in text
variant = text.replace("  id: docroute-tiny-lora\n",
                       "  id: docroute-tiny-seed7\n  parent: docroute-tiny-lora\n")
variant = variant.replace("seeds:\n  python: 0\n", "seeds:\n  python: 7\n")
(tiny / "seed7-undeclared.yaml").write_text(variant)
declared = variant.replace("  parent: docroute-tiny-lora\n",
                           "  parent: docroute-tiny-lora\n  changes:\n    seeds.python: 7\n")
(tiny / "seed7.yaml").write_text(declared)
PY
( cd "$OUT/tiny" && $GIT add seed7.yaml seed7-undeclared.yaml && $GIT commit -qm "seed variants" )
# (the variants keep the parent's code pin; the parent's own manifest changed since, so
# that row is accepted here with a reason)
ACCEPT=(--accept environment.code.commit --reason "demo: variants added after the parent's lock")
# the seed changed but experiment.changes does not say so: refused, naming the field
expect 1 ftmanifest verify "$OUT/tiny/seed7-undeclared.yaml" --no-signature "${ACCEPT[@]}"
expect 0 ftmanifest verify "$OUT/tiny/seed7.yaml" --no-signature "${ACCEPT[@]}"

step "18. the ledger: every attempt kept with its outcome and reason (a Ctrl-C, a failure), tampering detected; the sealed test split is used only through unseal"
expect 0 ftmanifest ledger plan "$OUT/tiny/seed7.yaml" --reason "demo: does the seed matter?"
# Ctrl-C during a run (SIGINT sent to `ftmanifest run`): the command is stopped and the
# attempt recorded as abandoned, with the reason given up front
python - "$OUT/tiny/seed7.yaml" "${ACCEPT[@]}" <<'PY'
import signal, subprocess, sys
cmd = ["ftmanifest", "run", sys.argv[1], "--no-signature", *sys.argv[2:],
       "--abandon-reason", "demo: stopped to free the GPU for a colleague", "--",
       sys.executable, "-c", "import signal, sys, time\n"
       "signal.signal(signal.SIGINT, lambda *a: sys.exit('train: stopped, checkpoint saved'))\n"
       "print('training...', flush=True); time.sleep(60)"]
print("$", " ".join(cmd[:4]), "... -- python train (then Ctrl-C)")
# a shell starts a background job with SIGINT ignored, and run would inherit that (as
# any program does, it then leaves SIGINT ignored): Ctrl-C is sent to a foreground run
signal.signal(signal.SIGINT, signal.default_int_handler)
proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
started = False
for line in proc.stdout:  # verify's report, then the command's first line
    print("  ", line.rstrip())
    if line.startswith("training..."):
        started = True
        break
proc.send_signal(signal.SIGINT)
code = proc.wait(timeout=60)
print(f"   -> exit {code} (the command's own; the attempt is recorded as abandoned)")
sys.exit(0 if started and code == 1 else 1)
PY
[ $? -eq 0 ] || { echo "   DEMO FAILED"; FAILED=1; }
expect 3 ftmanifest run "$OUT/tiny/seed7.yaml" --no-signature "${ACCEPT[@]}" --guarded -- sh -c 'exit 3'
expect 0 ftmanifest ledger invalidate docroute-tiny-seed7 --manifest "$OUT/tiny/seed7.yaml" \
  --reason "demo: the failed run used a half-written checkpoint"
expect 0 ftmanifest ledger list --manifest "$OUT/tiny/lora.yaml"
expect 0 ftmanifest ledger check --manifest "$OUT/tiny/lora.yaml"
# someone edits a recorded reason by hand: the record no longer matches its digest
cp -r "$OUT/tiny/.ftmanifest/ledger" "$OUT/ledger-edited"
sed -i 's/"exit_code": 3,/"exit_code": 0,/' "$OUT"/ledger-edited/*.json  # "it did not fail"
expect 1 ftmanifest ledger check --ledger "$OUT/ledger-edited"
# the sealed test split: scoring it without a recorded use is refused; unseal records
# the use (and prints the path to evaluate); a second use is recorded and warned about
python - "$OUT/tiny" <<'PY'
import json, sys, pathlib
tiny = pathlib.Path(sys.argv[1])
rows = [json.loads(line) for line in open(tiny / "data" / "test.jsonl")]
with open(tiny / "out" / "test-preds.jsonl", "w") as fh:
    for i, r in enumerate(rows, 1):
        fh.write(json.dumps({"id": i, "reference": r["label"], "prediction": r["label"]}) + "\n")
PY
SCORE_TEST=(ftmanifest score --manifest "$OUT/tiny/lora.yaml" --split test
  --predictions "$OUT/tiny/out/test-preds.jsonl")
expect 1 "${SCORE_TEST[@]}"
expect 0 ftmanifest unseal "$OUT/tiny/lora.yaml" --split test --reason "demo: the final number"
expect 0 "${SCORE_TEST[@]}"
expect 0 ftmanifest unseal "$OUT/tiny/lora.yaml" --split test --reason "demo: a reviewer asked again"
expect 0 "${SCORE_TEST[@]}"
expect 0 ftmanifest verify "$OUT/tiny/lora.yaml" "${ACCEPT[@]}"

step "19. preflight: the method's checks on one full step of the tiny model; a recipe that loses its target to truncation is refused; the memory estimate beside the measured peak; a rental plan from the measured throughput"
expect 0 ftmanifest preflight "$OUT/tiny/manifest.yaml" --out "$OUT/tokens.html"
sed 's/^  seq_len: 32$/  seq_len: 8/' "$OUT/tiny/manifest.yaml" > "$OUT/tiny/short.yaml"
expect 1 ftmanifest preflight "$OUT/tiny/short.yaml" --only tokens --no-record --per-category 0
rm "$OUT/tiny/short.yaml"
expect 0 ftmanifest estimate "$OUT/tiny/manifest.yaml"
expect 0 ftmanifest plan "$OUT/tiny/manifest.yaml" --days 3
# the same recipe for 200,000 steps on a 3-day rental: refused, by how much
sed 's/^  max_steps: 3$/  max_steps: 200000/' "$OUT/tiny/manifest.yaml" > "$OUT/tiny/long.yaml"
expect 1 ftmanifest plan "$OUT/tiny/long.yaml" --days 3 --tokens-per-second 50
rm "$OUT/tiny/long.yaml"

step "20. data check: leakage between splits, categories, lengths, counts and digests; a test record copied into train is refused; --write-clean drops exactly that record"
# step 12 edited tiny's training data: data check refuses it as verify does
expect 1 ftmanifest data check "$OUT/tiny/manifest.yaml" --examples 1
cp -r "$OUT/tiny" "$OUT/leaky"
expect 0 ftmanifest lock "$OUT/leaky/manifest.yaml"
expect 0 ftmanifest data check "$OUT/leaky/manifest.yaml" --examples 1
head -1 "$OUT/leaky/data/test.jsonl" >> "$OUT/leaky/data/train.jsonl"
expect 1 ftmanifest data check "$OUT/leaky/manifest.yaml" --examples 1 \
  --write-clean "$OUT/leaky/train-clean.jsonl"
# the clean copy cuts out exactly the leaking record: byte for byte the file that was
# pinned before it was appended, so it checks clean and lock has nothing to change
expect 0 mv "$OUT/leaky/train-clean.jsonl" "$OUT/leaky/data/train.jsonl"
expect 0 ftmanifest data check "$OUT/leaky/manifest.yaml" --examples 0
expect 0 ftmanifest lock "$OUT/leaky/manifest.yaml"

step "21. data sample: one example of each category of the eval split, rendered as the model sees them (the pinned tokenizer, the cut at seq_len, the tokens that carry the loss)"
expect 0 ftmanifest data sample "$OUT/leaky/manifest.yaml" --split eval --per-category 1 \
  --out "$OUT/sample.html"

step "22. torchrun: lock, verify, scan and data check over the ranks of a 2-process job; one rank with a different environment variable stops the whole job, naming the rank"
# torchrun's launcher prints its own Python traceback when a rank exits non-zero (a
# refusal, here), so each rank's output goes to a log folder and is shown from there.
# dist CODE ARGS...: run `torchrun ... ARGS` on 2 ranks; show rank 0's output and every
# rank's stderr; check the job's exit code; a traceback in a rank fails the step.
dist() {
  local want=$1; shift
  local logs="$OUT/torchrun-logs"
  rm -rf "$logs"
  printf '$ torchrun --standalone --nproc-per-node 2 %s\n' "$*" | tee -a "$FULL"
  # a rank that dies of a signal prints its Python stack (faulthandler) in its stderr
  PYTHONFAULTHANDLER=1 torchrun --standalone --nproc-per-node 2 --log-dir "$logs" --redirects 3 "$@" \
    > "$OUT/torchrun-agent.log" 2>&1
  local got=$?
  cat "$logs"/*/attempt_0/0/stdout.log "$logs"/*/attempt_0/*/stderr.log > "$LOG"
  show "$LOG"
  judge "$want" "$got" "$logs"/*/attempt_0/*/std*.log
  # an unexpected code with nothing in the ranks' logs (a rank killed by a signal, the
  # launcher's own failure) is explained only by the launcher: show its last lines
  if [ "$got" -ne "$want" ]; then
    printf "   torchrun's own output (%s):\n" "$OUT/torchrun-agent.log"
    grep -v '^[[:space:]]*$' "$OUT/torchrun-agent.log" | tail -n 25 | sed 's/^/   | /'
  fi
}
cp -r "$OUT/leaky" "$OUT/ddp"
printf 'distributed:\n  strategy: ddp\n  world_size: 2\n  nodes: 1\n' >> "$OUT/ddp/manifest.yaml"
( cd "$OUT/ddp" && $GIT add -A && $GIT commit -qm "two ranks" )
export TOKENIZERS_PARALLELISM=false
dist 0 -m ftmanifest lock "$OUT/ddp/manifest.yaml" --distributed
expect 0 ftmanifest sign "$OUT/ddp/manifest.yaml" --key "$OUT/keys/alice" --replace
dist 0 -m ftmanifest verify "$OUT/ddp/manifest.yaml" --distributed
dist 0 -m ftmanifest scan "$OUT/ddp/data" --distributed
dist 0 -m ftmanifest data check "$OUT/ddp/manifest.yaml" --distributed --examples 0
# rank 1 alone runs with another value of a pinned variable: every rank refuses
dist 1 --no-python bash -c '[ "$LOCAL_RANK" = 1 ] && export TOKENIZERS_PARALLELISM=true
  exec ftmanifest verify "$0" --distributed' "$OUT/ddp/manifest.yaml"
unset TOKENIZERS_PARALLELISM

step "summary"
took
# a crash is never a refusal, in a step's output or anywhere else in the log
if grep -q "Traceback (most recent call last)" "$FULL"; then
  echo "a Python traceback is in $OUT/demo.log: DEMO FAILED"
  FAILED=1
fi
if [ "$FAILED" -eq 0 ]; then
  echo "demo finished: every pass passed and every refusal was refused (all output: $OUT/demo.log)"
else
  echo "demo FAILED: see the steps marked DEMO FAILED above (all output: $OUT/demo.log)"
fi
cat <<'TXT'

start your own experiment:
  ftmanifest init exp.yaml --from args.json adapter_config.json MODEL_DIR data/   # derive what you have
  ftmanifest lint exp.yaml                       # fill every FILL it names
  ftmanifest keygen --comment you@example.org --add-trust
  ftmanifest lock exp.yaml && ftmanifest sign exp.yaml && ftmanifest verify exp.yaml
TXT
exit "$FAILED"
