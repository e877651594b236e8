// @ts-check
// Starting child processes with logs, and ending every process the test started, by pid.
//
// Each child gets a unique marker variable in its environment. Descendants inherit it (the
// extension host, the language server, the traced script, chromium's helpers), so at the end
// `/proc/*/environ` names every process this run started, even ones that left the process group
// or were re-parented when their parent died. Each is sent SIGTERM, then SIGKILL, by pid.

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';

export const MARKER_VARIABLE = 'SHAPELENS_E2E_RUN_ID';

/**
 * @typedef {object} Started
 * @property {import('node:child_process').ChildProcess} child
 * @property {string} name
 * @property {Promise<number | null>} exited resolves with the exit code (null when signalled)
 */

export class ProcessTracker {
  constructor() {
    /** Unique for this run: the value of {@link MARKER_VARIABLE} in every child's environment. */
    this.marker = `${process.pid}-${randomBytes(8).toString('hex')}`;
    /** @type {Started[]} */
    this.started = [];
  }

  /**
   * The environment for a child: `base` plus the marker.
   * @param {NodeJS.ProcessEnv} base
   * @returns {NodeJS.ProcessEnv}
   */
  env(base) {
    return { ...base, [MARKER_VARIABLE]: this.marker };
  }

  /**
   * Starts a process in its own process group, its stdout and stderr appended to `logFile`.
   * @param {string} name
   * @param {string} command
   * @param {string[]} args
   * @param {{ env: NodeJS.ProcessEnv, cwd: string, logFile: string }} options
   * @returns {Started}
   */
  spawn(name, command, args, options) {
    const log = createWriteStream(options.logFile, { flags: 'a' });
    log.write(`$ ${[command, ...args].join(' ')}\n`);
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: this.env(options.env),
      detached: true, // its own process group, ended as a group
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout?.pipe(log, { end: false });
    child.stderr?.pipe(log, { end: false });
    /** @type {Promise<number | null>} */
    const exited = new Promise((resolve) => {
      child.once('error', (error) => {
        log.write(`\n[e2e] ${name} failed to start: ${error.message}\n`);
        resolve(-1);
      });
      child.once('close', (code) => {
        log.end();
        resolve(code);
      });
    });
    const started = { child, name, exited };
    this.started.push(started);
    return started;
  }

  /**
   * Runs a command to completion (with a deadline) and returns its exit code.
   * @param {string} name
   * @param {string} command
   * @param {string[]} args
   * @param {{ env: NodeJS.ProcessEnv, cwd: string, logFile: string, timeoutMs: number }} options
   * @returns {Promise<number | null>}
   */
  async run(name, command, args, options) {
    const started = this.spawn(name, command, args, options);
    let timer;
    const timedOut = new Promise((resolve) => {
      timer = setTimeout(() => resolve('timeout'), options.timeoutMs);
    });
    const result = await Promise.race([started.exited, timedOut]);
    clearTimeout(timer);
    if (result === 'timeout') {
      throw new Error(`${name} did not finish within ${options.timeoutMs / 1000} s (log: ${options.logFile})`);
    }
    return /** @type {number | null} */ (result);
  }

  /**
   * The pids of every live process carrying this run's marker (never this process itself).
   * @returns {Promise<number[]>}
   */
  async markedPids() {
    const needle = Buffer.from(`${MARKER_VARIABLE}=${this.marker}\0`);
    /** @type {number[]} */
    const pids = [];
    for (const entry of await readdir('/proc')) {
      const pid = Number(entry);
      if (!Number.isInteger(pid) || pid === process.pid) continue;
      try {
        const environ = await readFile(`/proc/${pid}/environ`);
        if (environ.includes(needle) && !(await isZombie(pid))) pids.push(pid);
      } catch {
        // gone already, or not ours to read
      }
    }
    return pids;
  }

  /**
   * The live marked processes whose command line contains `needle`, as `pid (command line)`.
   * @param {string} needle
   * @returns {Promise<string[]>}
   */
  async markedProcessesRunning(needle) {
    /** @type {string[]} */
    const found = [];
    for (const pid of await this.markedPids()) {
      try {
        const commandLine = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').join(' ').trim();
        if (commandLine.includes(needle)) found.push(`${pid} (${commandLine.slice(0, 120)})`);
      } catch {
        // gone already
      }
    }
    return found;
  }

  /**
   * Ends every process this run started: each process group, then every marked pid.
   * SIGTERM first, SIGKILL after `graceMs`. Returns the pids that survived (should be none).
   * @param {{ graceMs?: number, log?: (line: string) => void }} [options]
   * @returns {Promise<number[]>}
   */
  async endAll(options = {}) {
    const graceMs = options.graceMs ?? 5000;
    const log = options.log ?? (() => {});
    const groups = this.started
      .filter((s) => s.child.pid !== undefined && s.child.exitCode === null && s.child.signalCode === null)
      .map((s) => /** @type {number} */ (s.child.pid));
    const first = await this.markedPids();
    if (groups.length > 0 || first.length > 0) {
      const described = await Promise.all(first.map(describe));
      log(`ending process groups [${groups.join(', ')}] and pids [${described.join(', ')}]`);
    }
    signalAll(groups, first, 'SIGTERM');
    const deadline = Date.now() + graceMs;
    let alive = await this.markedPids();
    while (alive.length > 0 && Date.now() < deadline) {
      await delay(100); // waiting for processes to exit after SIGTERM: there is no event to await
      alive = await this.markedPids();
    }
    if (alive.length > 0) {
      log(`SIGKILL to pids still alive after ${graceMs} ms: [${alive.join(', ')}]`);
      signalAll(groups, alive, 'SIGKILL');
      const killDeadline = Date.now() + 3000;
      while (alive.length > 0 && Date.now() < killDeadline) {
        await delay(100);
        alive = await this.markedPids();
      }
    }
    return alive;
  }
}

/**
 * @param {number[]} groups
 * @param {number[]} pids
 * @param {NodeJS.Signals} signal
 */
function signalAll(groups, pids, signal) {
  for (const group of groups) {
    try {
      process.kill(-group, signal);
    } catch {
      // the group is gone
    }
  }
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}

/**
 * `pid (what)`: the first words of its command line, for the log.
 * @param {number} pid
 */
async function describe(pid) {
  try {
    const argv = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').filter(Boolean);
    const words = argv.slice(0, 4).map((arg, i) => (i === 0 || arg.includes('/') ? arg.split('/').pop() : arg));
    return `${pid} (${words.join(' ').slice(0, 60)})`;
  } catch {
    return String(pid);
  }
}

/**
 * A zombie has exited and only waits for its parent to reap it: it needs no signal.
 * @param {number} pid
 * @returns {Promise<boolean>}
 */
async function isZombie(pid) {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}
