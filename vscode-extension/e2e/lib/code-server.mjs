// @ts-check
// A fresh code-server: its own profile, extensions and XDG folders under a temporary folder,
// the extension installed from the .vsix, bound to a free loopback port.

import { mkdir, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';

/**
 * @typedef {object} Profile
 * @property {string} userDataDir
 * @property {string} extensionsDir
 * @property {NodeJS.ProcessEnv} env HOME and XDG_* inside the temporary folder
 */

/**
 * Creates the folders and the user settings.
 * @param {string} root the run's temporary folder
 * @param {string} python the interpreter the extension runs the user's code with
 * @param {NodeJS.ProcessEnv} [extraEnv] more variables for code-server and its children
 * @returns {Promise<Profile>}
 */
export async function prepareProfile(root, python, extraEnv = {}) {
  const home = path.join(root, 'home');
  const userDataDir = path.join(root, 'user-data');
  const extensionsDir = path.join(root, 'extensions');
  /** @type {NodeJS.ProcessEnv} */
  const env = {
    ...process.env,
    HOME: home,
    XDG_CONFIG_HOME: path.join(home, '.config'),
    XDG_DATA_HOME: path.join(home, '.local', 'share'),
    XDG_CACHE_HOME: path.join(home, '.cache'),
    XDG_STATE_HOME: path.join(home, '.local', 'state'),
    XDG_RUNTIME_DIR: path.join(root, 'runtime'),
    ...extraEnv,
  };
  for (const dir of [
    userDataDir,
    extensionsDir,
    env.XDG_CONFIG_HOME,
    env.XDG_DATA_HOME,
    env.XDG_CACHE_HOME,
    env.XDG_STATE_HOME,
  ]) {
    await mkdir(/** @type {string} */ (dir), { recursive: true });
  }
  await mkdir(/** @type {string} */ (env.XDG_RUNTIME_DIR), { recursive: true, mode: 0o700 });
  // Variables of the outer VS Code or code-server, if this runs inside one, would leak into ours.
  for (const name of Object.keys(env)) {
    if (name.startsWith('VSCODE_') || name.startsWith('CODE_SERVER_') || name === 'ELECTRON_RUN_AS_NODE') {
      delete env[name];
    }
  }
  const settings = {
    'shapelens.interpreter': python,
    'security.workspace.trust.enabled': false,
    'telemetry.telemetryLevel': 'off',
    'update.mode': 'none',
    'extensions.autoCheckUpdates': false,
    'extensions.autoUpdate': false,
    'extensions.ignoreRecommendations': true,
    'workbench.startupEditor': 'none',
    'workbench.tips.enabled': false,
    'workbench.enableExperiments': false,
    'workbench.welcomePage.walkthroughs.openOnInstall': false,
    'window.restoreWindows': 'none',
    'editor.minimap.enabled': false,
    'editor.hover.delay': 300,
    'files.autoSave': 'off',
    'git.enabled': false,
  };
  await mkdir(path.join(userDataDir, 'User'), { recursive: true });
  await writeFile(path.join(userDataDir, 'User', 'settings.json'), `${JSON.stringify(settings, null, 2)}\n`);
  return { userDataDir, extensionsDir, env };
}

/**
 * The common code-server arguments for this profile.
 * @param {Profile} profile
 */
function profileArgs(profile) {
  return [
    '--user-data-dir',
    profile.userDataDir,
    '--extensions-dir',
    profile.extensionsDir,
    '--disable-telemetry',
    '--disable-update-check',
  ];
}

/**
 * @param {import('./processes.mjs').ProcessTracker} tracker
 * @param {{ codeServer: string, vsix: string, profile: Profile, cwd: string, logFile: string }} options
 */
export async function installExtension(tracker, options) {
  const code = await tracker.run(
    'code-server --install-extension',
    options.codeServer,
    [...profileArgs(options.profile), '--install-extension', options.vsix],
    { env: options.profile.env, cwd: options.cwd, logFile: options.logFile, timeoutMs: 120_000 },
  );
  if (code !== 0) {
    throw new Error(`code-server --install-extension ${options.vsix} exited with ${code} (log: ${options.logFile})`);
  }
}

/**
 * Starts code-server on a free loopback port and waits for /healthz.
 * @param {import('./processes.mjs').ProcessTracker} tracker
 * @param {{ codeServer: string, profile: Profile, folder: string, cwd: string, logFile: string, timeoutMs: number }} options
 * @returns {Promise<{ url: string, pid: number | undefined }>}
 */
export async function startCodeServer(tracker, options) {
  const port = await freePort();
  const started = tracker.spawn(
    'code-server',
    options.codeServer,
    [
      ...profileArgs(options.profile),
      '--auth',
      'none',
      '--bind-addr',
      `127.0.0.1:${port}`,
      '--disable-workspace-trust',
      '--disable-getting-started-override',
      options.folder,
    ],
    { env: options.profile.env, cwd: options.cwd, logFile: options.logFile },
  );
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + options.timeoutMs;
  let exitCode = /** @type {number | null | undefined} */ (undefined);
  void started.exited.then((code) => {
    exitCode = code;
  });
  for (;;) {
    if (exitCode !== undefined) {
      throw new Error(`code-server exited with ${exitCode} before it was ready (log: ${options.logFile})`);
    }
    try {
      const response = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(2000) });
      if (response.ok) return { url, pid: started.child.pid };
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      throw new Error(`code-server did not answer ${url}/healthz within ${options.timeoutMs / 1000} s (log: ${options.logFile})`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200)); // poll interval
  }
}

/** @returns {Promise<number>} a port that was free a moment ago on 127.0.0.1 */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => (port ? resolve(port) : reject(new Error('no free port'))));
    });
  });
}
