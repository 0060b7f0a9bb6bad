#!/usr/bin/env bash
# Validates the Kubernetes manifests of deploy/k8s/ against the Kubernetes
# API schemas with kubernetes-validate --strict (unknown fields are errors;
# the schemas ship with the package: no network at validation time), after
# checking on a broken copy that it does reject an unknown field.
# kubernetes-validate lives in a venv, deploy/k8s/.venv, installed from
# deploy/k8s/requirements.txt; pip runs only when that file changed since
# the last successful install (a stamp in the venv).
#
#   bash scripts/k8s-validate.sh                 # install if needed, validate
#   bash scripts/k8s-validate.sh --install-only  # what scripts/setup.sh runs
#
# Environment: PYTHON (interpreter for the venv, default python3).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/lib.sh
. "$root/scripts/lib.sh"

install_only=0
for arg in "$@"; do
  case "$arg" in
    --install-only) install_only=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"
      exit 0
      ;;
    *)
      echo "k8s-validate.sh: unknown option $arg (try --help)" >&2
      exit 2
      ;;
  esac
done

k8s="$root/deploy/k8s"
venv="$k8s/.venv"
venv_install "$venv" "$k8s/requirements.txt" kubernetes-validate
((install_only)) && exit 0

validate=("$venv/bin/kubernetes-validate" --strict --quiet)
mapfile -t manifests < <(find "$k8s" -maxdepth 1 -name '*.yaml' | sort)
((${#manifests[@]} > 0)) || {
  echo "k8s-validate.sh: no manifests in $k8s" >&2
  exit 1
}
# The control: an unknown field in the Job must fail validation.
broken="$(mktemp --suffix=.yaml)"
trap 'rm -f "$broken"' EXIT
sed 's/^  completionMode: Indexed$/  completionMode: Indexed\n  completionz: 3/' "$k8s/job.yaml" >"$broken"
grep -q '^  completionz: 3$' "$broken" || {
  echo "k8s-validate.sh: job.yaml changed shape (no completionMode line to break)" >&2
  exit 1
}
if "${validate[@]}" "$broken" >/dev/null 2>&1; then
  echo "k8s-validate.sh: kubernetes-validate --strict accepted an unknown field: it checks nothing" >&2
  exit 1
fi
"${validate[@]}" "${manifests[@]}"
echo "k8s: ${#manifests[@]} manifests valid (kubernetes-validate --strict): ${manifests[*]##*/}" >&2
