// @ts-check
// Inputs of the end-to-end test: paths from the environment, with defaults for this repository.

import { execFileSync } from 'node:child_process';
import { accessSync, constants, existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/**
 * @typedef {object} Config
 * @property {string} vsix the built extension
 * @property {string} python an interpreter with torch, ipykernel and nbclient (the extension bundles the server's libraries)
 * @property {string} codeServer the code-server launcher
 * @property {string} chromium Debian's chromium
 * @property {string} toolsDir where playwright-core is installed (scripts/install-chromium.sh)
 * @property {string} examples the folder copied into a temporary workspace
 * @property {string} artifacts screenshots and logs
 * @property {number} timeoutMs the whole run, set-up and clean-up included
 * @property {boolean} keepTemp keep the temporary folder (profile, workspace) for debugging
 */

/**
 * @param {string | undefined} value an environment value, relative to the working directory
 * @param {string} fallback relative to the repository root
 */
function pathFrom(value, fallback) {
  return value ? path.resolve(value) : path.join(repoRoot, fallback);
}

/**
 * Reads the configuration and checks that every input exists, with a message that says how to
 * make the missing one.
 * @param {NodeJS.ProcessEnv} env
 * @returns {Config}
 */
export function loadConfig(env) {
  const config = {
    vsix: pathFrom(env.SHAPELENS_VSIX, 'vscode-extension/shapelens.vsix'),
    // Not resolved through symlinks: a venv's python must be invoked by its path inside the venv.
    python: pathFrom(env.SHAPELENS_PYTHON, '.venv/bin/python'),
    codeServer: pathFrom(env.SHAPELENS_CODE_SERVER, '.tools/code-server/node_modules/.bin/code-server'),
    chromium: env.SHAPELENS_CHROMIUM ? path.resolve(env.SHAPELENS_CHROMIUM) : which('chromium'),
    toolsDir: pathFrom(env.SHAPELENS_E2E_TOOLS, '.tools/e2e'),
    examples: path.join(repoRoot, 'examples'),
    artifacts: pathFrom(env.SHAPELENS_E2E_ARTIFACTS, '.artifacts/e2e'),
    timeoutMs: 1000 * Number(env.SHAPELENS_E2E_TIMEOUT_S ?? 360),
    keepTemp: env.SHAPELENS_E2E_KEEP_TMP === '1',
  };
  /** @type {string[]} */
  const problems = [];
  if (!existsSync(config.vsix)) {
    problems.push(`no extension package at ${config.vsix} (build it with \`make vsix\`, or set SHAPELENS_VSIX)`);
  }
  if (!isExecutable(config.python)) {
    problems.push(`no Python interpreter at ${config.python} (run \`make install\`, or set SHAPELENS_PYTHON)`);
  } else {
    // torch for every run; ipykernel and nbclient for the notebook a real kernel executes.
    const missing = ['torch', 'ipykernel', 'nbclient'].filter((name) => !hasModule(config.python, name));
    if (missing.length > 0) {
      problems.push(`${config.python} cannot import ${missing.join(', ')} (run \`make install\`, or set SHAPELENS_PYTHON)`);
    }
  }
  if (!isExecutable(config.codeServer)) {
    problems.push(`no code-server at ${config.codeServer} (run scripts/install-code-server.sh)`);
  }
  if (!config.chromium || !isExecutable(config.chromium)) {
    problems.push('no chromium on PATH (run scripts/install-chromium.sh, or set SHAPELENS_CHROMIUM)');
  }
  if (!existsSync(path.join(config.examples, 'seed_linear_fit.py'))) {
    problems.push(`no ${path.join(config.examples, 'seed_linear_fit.py')}`);
  }
  if (!Number.isFinite(config.timeoutMs) || config.timeoutMs <= 0) {
    problems.push(`SHAPELENS_E2E_TIMEOUT_S must be a positive number of seconds, not ${env.SHAPELENS_E2E_TIMEOUT_S}`);
  }
  if (problems.length > 0) {
    throw new Error(`the end-to-end test cannot start:\n  - ${problems.join('\n  - ')}`);
  }
  return config;
}

/** @param {string} file */
function isExecutable(file) {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** @param {string} name */
function which(name) {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, name);
    if (dir && isExecutable(candidate)) return candidate;
  }
  return '';
}

/**
 * Whether the interpreter finds a module (without importing it: torch takes seconds).
 * @param {string} python
 * @param {string} name
 */
function hasModule(python, name) {
  try {
    execFileSync(python, ['-c', 'import importlib.util, sys; sys.exit(importlib.util.find_spec(sys.argv[1]) is None)', name], {
      stdio: 'ignore',
      timeout: 30_000,
    });
    return true;
  } catch {
    return false;
  }
}
