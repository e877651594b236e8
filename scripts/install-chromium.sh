#!/usr/bin/env bash
# Installs what drives the end-to-end test's browser, idempotently:
#   - Debian's `chromium` (apt; Playwright's own browser download host is unreachable)
#   - playwright-core (npm, pinned) into .tools/e2e (git-ignored)
# The end-to-end test finds them as `command -v chromium` and .tools/e2e/node_modules/playwright-core.
set -euo pipefail

# 1.64.1 is built against Chromium 156, the version Debian bookworm ships now; CDP is backwards
# compatible, so a somewhat newer Debian chromium keeps working with it.
PLAYWRIGHT_CORE_VERSION=1.64.1
# Only for type-checking the harness (`tsc -p vscode-extension/e2e`): not needed to run it.
TYPESCRIPT_VERSION=5.9.3
TYPES_NODE_VERSION=20.19.43

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PREFIX=${E2E_TOOLS_PREFIX:-$ROOT/.tools/e2e}

SUDO=
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

if ! command -v chromium >/dev/null 2>&1; then
  echo "install-chromium: apt-get install chromium"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    chromium fonts-dejavu-core >/dev/null
fi
# (Debian's /usr/bin/chromium wrapper may print a harmless "[: ...: unexpected operator".)
chromium --version 2>/dev/null

version_of() {
  node -p "try { require('$PREFIX/node_modules/$1/package.json').version } catch { '' }"
}
if [ "$(version_of playwright-core)" != "$PLAYWRIGHT_CORE_VERSION" ] \
  || [ "$(version_of typescript)" != "$TYPESCRIPT_VERSION" ] \
  || [ "$(version_of @types/node)" != "$TYPES_NODE_VERSION" ]; then
  mkdir -p "$PREFIX"
  [ -f "$PREFIX/package.json" ] || echo '{"name":"shapelens-e2e-tools","private":true}' > "$PREFIX/package.json"
  echo "install-chromium: npm install playwright-core@$PLAYWRIGHT_CORE_VERSION into $PREFIX"
  npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error --save-exact \
    "playwright-core@$PLAYWRIGHT_CORE_VERSION" \
    "typescript@$TYPESCRIPT_VERSION" "@types/node@$TYPES_NODE_VERSION"
fi
echo "playwright-core $PLAYWRIGHT_CORE_VERSION: $PREFIX/node_modules/playwright-core"
