#!/usr/bin/env bash
# The wheels bench/gpu.sh needs on the GPU machine, downloaded here into .whl/ (or $WHEELS):
# what that machine lacks for tengen's single-process run on the JAX and PyTorch backends.
#
#   bash bench/gpu_wheels.sh        # then carry .whl/ with the repository to the GPU machine
#
# The GPU machine (Python 3.12, no network) has PyTorch, JAX, numba, numpy 2.5 and the
# distributions in ON_THE_MACHINE below; it has no TensorFlow, Ray or Redis, which the
# single-process run on JAX or PyTorch does not import. tengen itself is not a wheel:
# bench/gpu.sh puts the repository on PYTHONPATH, so the code measured is the checkout's,
# with nothing to rebuild when it changes. Versions are those our .venv runs Keras with.
# After the download, every wheel's Requires-Dist (markers evaluated for CPython 3.12 on
# Linux) must be met by another wheel or by ON_THE_MACHINE, and the folder must stay under
# bench/gpu.sh's budget: else this script fails and says which.

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WHEELS="${WHEELS:-$ROOT/.whl}"
PYTHON="${PYTHON:-python3}"
BUDGET_MIB="${BUDGET_MIB:-40}"

# what tengen's single-process run imports that the GPU machine lacks (keras brings
# namex and optree; pydantic, the config, brings pydantic-core, annotated-types and
# typing-inspection; zstandard packs the games; sgfmill writes Go's game records)
PINS=(
    keras==3.15.1
    namex==0.1.0
    optree==0.20.0
    pydantic==2.14.4
    pydantic-core==2.50.5
    annotated-types==0.8.0
    typing-inspection==0.4.5
    zstandard==0.25.0
    sgfmill==1.1.1
)

# what the GPU machine has (distribution names as pip lists them), with the requirements
# that came with jax (jaxlib, scipy, opt-einsum), torch (filelock), requests (certifi,
# idna, urllib3, charset-normalizer) and rich (pygments, markdown-it-py, mdurl)
ON_THE_MACHINE=(
    torch jax jaxlib jax-cuda13-plugin jax-cuda13-pjrt scipy opt-einsum numpy numba llvmlite
    safetensors pyyaml msgpack prometheus-client fsspec aiohttp absl-py rich ml-dtypes h5py
    packaging typing-extensions requests psutil protobuf
    filelock certifi idna urllib3 charset-normalizer pygments markdown-it-py mdurl
)

mkdir -p "$WHEELS"
for pin in "${PINS[@]}"; do
    "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$WHEELS" "$pin"
done

"$PYTHON" - "$WHEELS" "$BUDGET_MIB" "${PINS[*]}" "${ON_THE_MACHINE[*]}" <<'EOF'
import re
import sys
import zipfile
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

folder, budget_mib, pins, there = Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split()
wanted = {canonicalize_name(pin.split("==")[0]) for pin in pins}
wheels = {canonicalize_name(parse_wheel_filename(p.name)[0]): p for p in sorted(folder.glob("*.whl"))}
stray = sorted(set(wheels) - wanted)
missing = sorted(wanted - set(wheels))
# the GPU machine: CPython 3.12 on x86-64 Linux
environment = {**default_environment(), "python_version": "3.12", "python_full_version": "3.12.3",
               "implementation_name": "cpython", "platform_python_implementation": "CPython",
               "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64", "extra": ""}
have = set(wheels) | {canonicalize_name(name) for name in there}
unmet = []
for name, path in wheels.items():
    with zipfile.ZipFile(path) as whl:
        metadata = next(n for n in whl.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
        text = whl.read(metadata).decode()
    for line in text.splitlines():
        if line.startswith("Requires-Dist:"):
            requirement = Requirement(line.split(":", 1)[1].strip())
            if requirement.marker is None or requirement.marker.evaluate(environment):
                if canonicalize_name(requirement.name) not in have:
                    unmet.append(f"{name} needs {requirement}")
total = sum(p.stat().st_size for p in folder.glob("*.whl"))
for name, path in wheels.items():
    print(f"{path.stat().st_size / 2**20:7.2f} MiB  {path.name}")
print(f"{total / 2**20:7.2f} MiB  in {len(wheels)} wheels, {folder} (budget {budget_mib:g} MiB)")
problems = ([f"not one of the pins (delete it): {', '.join(stray)}"] if stray else []) + \
    ([f"not downloaded: {', '.join(missing)}"] if missing else []) + unmet + \
    ([f"over the budget of {budget_mib:g} MiB"] if total > budget_mib * 2**20 else [])
if problems:
    sys.exit("gpu_wheels: " + "; ".join(problems))
EOF
