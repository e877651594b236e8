#!/usr/bin/env bash
# Installs code-server (a real VS Code in the browser) for the end-to-end test, idempotently.
#   scripts/install-code-server.sh            -> .tools/code-server/node_modules/.bin/code-server
# Needs Node 20 (code-server 4.100.3 is the newest release that runs on Node 20), apt and npm.
# Nothing is written into git-tracked folders; `.tools/` is git-ignored.
set -euo pipefail

CODE_SERVER_VERSION=4.100.3
# @vscode/ripgrep (a code-server dependency) downloads this tarball from GitHub in postinstall;
# GitHub is unreachable here, so the tarball is pre-seeded in its cache with Debian's rg.
RIPGREP_PKG_VERSION=1.15.11
RIPGREP_TARBALL=ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PREFIX=${CODE_SERVER_PREFIX:-$ROOT/.tools/code-server}
BIN=$PREFIX/node_modules/.bin/code-server

installed_version() {
  # Read package.json: `code-server --version` would write a config file under $HOME.
  node -p "try { require('$PREFIX/node_modules/code-server/package.json').version } catch { '' }"
}

if [ -x "$BIN" ] && [ "$(installed_version)" = "$CODE_SERVER_VERSION" ] \
  && [ -d "$PREFIX/node_modules/code-server/lib/vscode/node_modules" ]; then
  echo "code-server $CODE_SERVER_VERSION already installed: $BIN"
  exit 0
fi

node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" != 20 ]; then
  echo "install-code-server: code-server $CODE_SERVER_VERSION needs Node 20, found $(node --version)" >&2
  exit 1
fi

SUDO=
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

missing=()
dpkg -s libkrb5-dev >/dev/null 2>&1 || missing+=(libkrb5-dev)
command -v rg >/dev/null 2>&1 || missing+=(ripgrep)
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-code-server: apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

tmp=$(node -p 'require("os").tmpdir()')
cache=$tmp/vscode-ripgrep-cache-$RIPGREP_PKG_VERSION
if [ ! -s "$cache/$RIPGREP_TARBALL" ]; then
  stage=$(mktemp -d)
  cp "$(command -v rg)" "$stage/rg"
  mkdir -p "$cache"
  tar -czf "$cache/$RIPGREP_TARBALL" -C "$stage" rg
  rm -rf "$stage"
fi

mkdir -p "$PREFIX"
echo "install-code-server: npm install code-server@$CODE_SERVER_VERSION into $PREFIX (a few minutes)"
npm_config_unsafe_perm=true npm_config_yes=true \
  npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error \
  "code-server@$CODE_SERVER_VERSION"

if [ "$(installed_version)" != "$CODE_SERVER_VERSION" ] || [ ! -d "$PREFIX/node_modules/code-server/lib/vscode/node_modules" ]; then
  echo "install-code-server: code-server $CODE_SERVER_VERSION did not install completely into $PREFIX" >&2
  exit 1
fi
echo "code-server $(installed_version) installed: $BIN"
