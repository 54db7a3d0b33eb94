#!/usr/bin/env bash
# Installs the servers dlock's tests run against, from Debian packages, when
# they are missing. Safe to run again: it installs nothing that is present.
set -euo pipefail

# binary -> Debian package
declare -A pkgs=(
  [redis-server]=redis-server
  [redis-cli]=redis-tools
  [etcd]=etcd-server
  [etcdctl]=etcd-client
  [memcached]=memcached
  [psql]=postgresql-client
  [mariadb]=mariadb-client
  [javac]=default-jdk-headless # zklock's Curator interop test runs a Java source file
)

missing=()
for bin in "${!pkgs[@]}"; do
  command -v "$bin" >/dev/null 2>&1 || missing+=("${pkgs[$bin]}")
done
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing+=(postgresql)
[ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
[ -f /usr/share/java/curator-recipes.jar ] || missing+=(libcurator-recipes-java)
[ -f /usr/share/java/netty-codec.jar ] || missing+=(libnetty-java) # ZooKeeper's TLS port (Netty), in zklock's TLS test
[ -f /usr/lib/galera/libgalera_smm.so ] || missing+=(galera-4) # mysqllock's Galera refusal test
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all servers present"
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
mapfile -t uniq < <(printf '%s\n' "${missing[@]}" | sort -u)
echo "install-deps: installing ${uniq[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${uniq[@]}" >/dev/null
# Debian starts packaged servers as services; tests start their own private ones.
for svc in redis-server etcd memcached postgresql mariadb zookeeper; do
  $sudo service "$svc" stop >/dev/null 2>&1 || true
done
echo "install-deps: done"
