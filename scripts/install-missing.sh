# Sourced by demo.sh and test.sh: install_missing PACKAGE... installs, with
# apt-get, the packages dpkg does not list as installed (root needed only when
# something is missing).
install_missing() {
  local p missing=()
  for p in "$@"; do
    [[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" == installed ]] ||
      missing+=("$p")
  done
  if ((${#missing[@]} == 0)); then
    echo "all packages present"
    return 0
  fi
  if [[ $(id -u) -ne 0 ]]; then
    echo "missing packages: ${missing[*]} (run as root to install them)" >&2
    return 1
  fi
  echo "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q && apt-get install -y -q --no-install-recommends "${missing[@]}"
}
