#!/usr/bin/env bash
# The unit suite on another Python than the project's 3.11 (the wheel declares 3.11 to 3.14): a virtual
# environment of its own in .venv-<version> with requirements.txt's exact pins and the project in development
# mode (made once; a stamp skips it while requirements.txt and pyproject.toml are unchanged), then pytest's
# unit tests. The interpreter: python<version> on the PATH, else pyenv's newest <version>.x.
#
#   scripts/test-python.sh 3.13 [PYTEST_ARGS ...]
set -euo pipefail

SCRIPT_NAME=test-python.sh
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
VERSION=${1:-}
[[ $VERSION =~ ^3\.[0-9]+$ ]] || die "usage: scripts/test-python.sh 3.N [PYTEST_ARGS ...]"
shift
interpreter=$(command -v "python$VERSION" || true)
# A pyenv shim is on the PATH for every version pyenv knows, but runs only the versions made active.
if [ -n "$interpreter" ] && ! "$interpreter" -c 'import sys' >/dev/null 2>&1; then interpreter=; fi
if [ -z "$interpreter" ]; then
  interpreter=$(find "${PYENV_ROOT:-$HOME/.pyenv}/versions" -maxdepth 3 -path "*/$VERSION.*/bin/python$VERSION" 2>/dev/null | sort -V | tail -n1)
fi
[ -n "$interpreter" ] || die "no Python $VERSION: neither python$VERSION on the PATH nor one under pyenv's versions"
VENV=$ROOT/.venv-$VERSION
stamp=$VENV/.ds2-stamp
want=$(cat "$ROOT/requirements.txt" "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  log "making $VENV with $interpreter (requirements.txt's pins; about a minute once cached)"
  rm -rf "$VENV"
  "$interpreter" -m venv "$VENV"
  quiet() { "$@" 2>&1 | { grep -v "^WARNING: Location 'file://.*' is ignored" || true; } >&2; }
  quiet "$VENV/bin/python" -m pip install -q --upgrade pip
  quiet "$VENV/bin/python" -m pip install -q -r "$ROOT/requirements.txt"
  quiet "$VENV/bin/python" -m pip install -q --no-deps -e "$ROOT"
  rm -rf "$ROOT/ds2_autoscaler.egg-info" # as scripts/bootstrap.sh: the install's metadata is in the venv
  echo "$want" >"$stamp"
fi
log "unit suite on $("$VENV/bin/python" --version)"
cd "$ROOT"
exec "$VENV/bin/python" -m pytest tests/unit "$@"
