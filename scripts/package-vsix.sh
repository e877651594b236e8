#!/usr/bin/env bash
# `npm run package`: the .vsix, packed from a staging folder that holds only what it ships.
# vsce lists every file under its working folder before applying .vscodeignore, and the
# repository root holds the venvs, uv's cache and the e2e tools (hundreds of thousands of
# files, ~36 s of CPU to walk); the stage holds a few hundred.
set -euo pipefail
cd "$(dirname "$0")/.."
stage=build/vsix-stage
rm -rf "$stage"
mkdir -p "$stage/vscode-extension/out"
cp package.json .vscodeignore "$stage/"
cp vscode-extension/README.md "$stage/vscode-extension/"
cp vscode-extension/out/extension.js "$stage/vscode-extension/out/"
cp -r vscode-extension/python vscode-extension/bundled "$stage/vscode-extension/"
out=$PWD/vscode-extension/shapelens.vsix
cd "$stage"
"$OLDPWD/node_modules/.bin/vsce" package --allow-missing-repository --skip-license \
  --no-dependencies --readme-path vscode-extension/README.md -o "$out"
