#!/usr/bin/env node
// @ts-check
// End-to-end test of the ShapeLens extension in a real VS Code (code-server + headless chromium).
//
//   node vscode-extension/e2e/run.mjs
//
// Inputs (environment): SHAPELENS_VSIX (default vscode-extension/shapelens.vsix),
// SHAPELENS_PYTHON (default .venv/bin/python: an interpreter with torch),
// SHAPELENS_CODE_SERVER, SHAPELENS_CHROMIUM, SHAPELENS_E2E_TOOLS (playwright-core),
// SHAPELENS_E2E_ARTIFACTS (default .artifacts/e2e), SHAPELENS_E2E_TIMEOUT_S (default 360),
// SHAPELENS_E2E_KEEP_TMP=1 (keep the temporary profile and workspace).
// Install the tools first: scripts/install-code-server.sh and scripts/install-chromium.sh.
//
// Exit status 0 when every check passed; 1 with the reason on stderr otherwise. Screenshots,
// logs and result.json are written to the artifacts folder either way.

import { cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { installExtension, prepareProfile, startCodeServer } from './lib/code-server.mjs';
import { loadConfig, repoRoot } from './lib/config.mjs';
import { ProcessTracker } from './lib/processes.mjs';
import {
  activeTab,
  clickWord,
  dismissHover,
  editorLines,
  errorMessage,
  formatCells,
  formatLines,
  hoverWord,
  installPageHelpers,
  runCommand,
  treeRow,
  waitForEditor,
  waitForLines,
  waitForProblem,
  waitForTreeRows,
  variableRows,
  waitForCells,
  waitForNotification,
} from './lib/workbench.mjs';

const FILE = 'seed_linear_fit.py';
const SQUARED_DIFF_LINE = 'squared_diff = (y - pred) ** 2';
const PRED_LINE = 'pred = model(x)';
const LOOP_LINE = 'for _ in range(10):';
const ZERO_GRAD_LINE = 'optimizer.zero_grad()';
const INSERT_AFTER_LINE = 'import torch';
const INSERTED_TEXT = '# a line inserted by the end-to-end test';
const LOSS_BACKWARD_LINE = 'loss.backward()';
const SHAPE_COMMENT = '# (4, 1)';
const SHAPE_COMMENT_TITLE = `Add shape comment: ${SHAPE_COMMENT}`;
const RUN_FILE_TITLE = 'ShapeLens: Run File';
const DEBUG_FILE_TITLE = 'ShapeLens: Debug File';
/** In the command line of the process that runs the user's script under the tracer
 * (server/shapelens/runner/_bootstrap.py; debug runs always start it cold, never forked). */
const TRACED_CHILD = 'shapelens/runner/_bootstrap.py';
const CLEAR_TITLE = 'ShapeLens: Clear';
const LAUNCHED_FILE = 'launched.py';
const LAUNCHED_LINE = 'batch = torch.zeros(args.rows, width)';
/** A program that needs its launch configuration's args and env (.vscode/launch.json below). */
const LAUNCHED_SOURCE = `import argparse
import os

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--rows", type=int, required=True)
args = parser.parse_args()
width = int(os.environ["WIDTH"])
${'batch = torch.zeros(args.rows, width)'}
print(batch.sum().item())
`;
const SHAPES_FILE = 'on_gpu.py';
const SHAPES_LINE = 'pred = model(x)';
/** A CUDA program: on this GPU-less machine only a shape-only run gets through it. */
const SHAPES_SOURCE = `import torch

model = torch.nn.Linear(2, 1).cuda()
x = torch.randn(4, 2, device="cuda")
${'pred = model(x)'}
print(pred.sum().item())
`;
const SHAPES_TITLE = 'ShapeLens: Run File (Shapes Only)';
const LAUNCH_JSON = {
  version: '0.2.0',
  configurations: [
    {
      type: 'shapelens',
      request: 'launch',
      name: 'ShapeLens: launched with args and env',
      program: '${workspaceFolder}/launched.py',
      args: ['--rows', '3'],
      env: { WIDTH: '7' },
    },
  ],
};
const REVERT_TITLE = 'File: Revert File';
/** The Explorer's module tree: its section header, and the focus command VS Code makes for it
 * (titled after the view, in the category of its container). */
const MODULES_VIEW = 'ShapeLens';
const FOCUS_MODULES_TITLE = 'Explorer: Focus on ShapeLens View';
const MODEL_LINE = 'model = torch.nn.Linear(2, 1)';

/** A notebook run by a real Jupyter kernel with `%load_ext shapelens` before code-server starts
 * (fixtures/notebook/run_notebook.py): its trace goes to the workspace's `.shapelens/`. */
const NOTEBOOK_FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'notebook');
const NOTEBOOK = 'shapes.ipynb';
const NOTEBOOK_X_LINE = 'x = torch.ones(4, 3)';
const NOTEBOOK_IMPORT_LINE = 'import torch';
const NOTEBOOK_OUT_LINE = 'out = a @ b';
const NOTEBOOK_Y_LINE = 'y = project(x, w)';
const NOTEBOOK_ROW_LINE = 'row = y[i]';
const NOTEBOOK_LOOP_LINE = 'for i in range(3):';
const TRACE_KERNEL_TITLE = "ShapeLens: Trace this Notebook's Kernel";
/** Run by a second kernel while shapes.ipynb is open: x has 7 rows there, and its last cell's text
 * is the same as shapes.ipynb's, so that cell shows the newer execution, `y (7,5)`. */
const RERUN_NOTEBOOK = 'rerun.ipynb';

/** @param {import('./lib/workbench.mjs').EditorLine[]} lines @param {string} code */
const lineOf = (lines, code) => lines.find((l) => l.text.trim() === code);

const started = Date.now();
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)}s`;
/** @param {string} message */
const log = (message) => console.log(`[e2e ${elapsed().padStart(6)}] ${message}`);

/** @typedef {{ name: string, seconds: number, ok: boolean, detail?: string }} StepResult */

class Run {
  /** @param {import('./lib/config.mjs').Config} config */
  constructor(config) {
    this.config = config;
    this.tracker = new ProcessTracker();
    /** @type {StepResult[]} */
    this.steps = [];
    /** @type {import('playwright-core').BrowserContext | undefined} */
    this.context = undefined;
    /** @type {import('playwright-core').Page | undefined} */
    this.page = undefined;
    /** @type {string | undefined} */
    this.tempRoot = undefined;
    /** @type {string | undefined} */
    this.userDataDir = undefined;
    /** @type {import('./lib/code-server.mjs').Profile | undefined} */
    this.profile = undefined;
    this.screenshotCount = 0;
    /** @type {(() => Promise<void>) | undefined} writes the browser's console messages */
    this.flushConsole = undefined;
    /** @type {Promise<void> | undefined} */
    this.cleanedUp = undefined;
  }

  /**
   * Runs one step, records its time and outcome, and takes a screenshot after it.
   * @template T
   * @param {string} name
   * @param {() => Promise<T>} body
   * @param {{ screenshot?: boolean }} [options] no screenshot when the page shows nothing yet
   * @returns {Promise<T>}
   */
  async step(name, body, options = {}) {
    const stepStarted = Date.now();
    log(`${name} …`);
    try {
      const result = await body();
      const seconds = (Date.now() - stepStarted) / 1000;
      this.steps.push({ name, seconds, ok: true });
      log(`${name}: ok (${seconds.toFixed(1)} s)`);
      if (options.screenshot ?? true) await this.screenshot(name);
      return result;
    } catch (error) {
      const seconds = (Date.now() - stepStarted) / 1000;
      const detail = errorMessage(error);
      this.steps.push({ name, seconds, ok: false, detail });
      await this.screenshot(`FAILED ${name}`);
      throw new Error(`step "${name}" failed: ${detail}`);
    }
  }

  /** @param {string} name */
  async screenshot(name) {
    if (!this.page || this.page.isClosed()) return;
    this.screenshotCount += 1;
    const slug = name.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '');
    const file = path.join(this.config.artifacts, `${String(this.screenshotCount).padStart(2, '0')}-${slug}.png`);
    try {
      await this.page.screenshot({ path: file, timeout: 15_000 });
      log(`  screenshot ${path.relative(repoRoot, file)}`);
    } catch (error) {
      log(`  (no screenshot for "${name}": ${errorMessage(error)})`);
    }
  }

  async main() {
    const { config } = this;
    await rm(config.artifacts, { recursive: true, force: true });
    await mkdir(config.artifacts, { recursive: true });
    const tempRoot = await mkdtemp(path.join(os.tmpdir(), 'shapelens-e2e-'));
    this.tempRoot = tempRoot;
    const workspace = path.join(tempRoot, 'workspace');
    await cp(config.examples, workspace, { recursive: true, filter: (source) => !source.includes('__pycache__') });
    const file = path.join(workspace, FILE);
    await writeFile(path.join(workspace, LAUNCHED_FILE), LAUNCHED_SOURCE);
    await writeFile(path.join(workspace, SHAPES_FILE), SHAPES_SOURCE);
    await mkdir(path.join(workspace, '.vscode'), { recursive: true });
    await writeFile(path.join(workspace, '.vscode', 'launch.json'), `${JSON.stringify(LAUNCH_JSON, null, 2)}\n`);
    const codeServerLog = path.join(config.artifacts, 'code-server.log');
    log(`vsix ${config.vsix}`);
    log(`python ${config.python}`);
    log(`workspace ${workspace}`);

    // debugpy (in the script a debug run starts) writes its logs there: they outlive the run.
    const profile = await prepareProfile(tempRoot, config.python, { DEBUGPY_LOG_DIR: path.join(config.artifacts, 'debugpy-logs') });
    this.userDataDir = profile.userDataDir;
    this.profile = profile;

    await this.step('install the extension into code-server', async () => {
      await installExtension(this.tracker, { codeServer: config.codeServer, vsix: config.vsix, profile, cwd: tempRoot, logFile: codeServerLog });
      const installed = await readdir(profile.extensionsDir);
      if (!installed.some((name) => name.toLowerCase().startsWith('shapelens.shapelens-'))) {
        throw new Error(`the extension is not in ${profile.extensionsDir} after --install-extension (found: ${installed.join(', ')})`);
      }
    }, { screenshot: false });

    // Before code-server starts: the language server finds the kernel's trace already there.
    const executed = await this.step(`execute ${NOTEBOOK} with a real Jupyter kernel (%load_ext shapelens)`, async () => {
      await this.executeNotebook(workspace, NOTEBOOK, profile.env);
      const traceDir = path.join(workspace, '.shapelens');
      const files = (await readdir(traceDir)).filter((name) => /^kernel-.*\.json$/.test(name));
      if (files.length !== 1) throw new Error(`${traceDir} holds ${files.length} kernel traces (${files.join(', ')}), not one`);
      /** @type {{ cells?: { file: string, source: string }[], lines?: unknown[] }} */
      const trace = JSON.parse(await readFile(path.join(traceDir, files[0]), 'utf8'));
      await cp(traceDir, path.join(config.artifacts, 'notebook-trace'), { recursive: true });
      if (!trace.cells?.some((cell) => cell.source.includes(NOTEBOOK_X_LINE))) {
        throw new Error(`the kernel's trace ${files[0]} has no cell with \`${NOTEBOOK_X_LINE}\``);
      }
      return { trace: files[0], cells: trace.cells.length, lines: trace.lines?.length };
    }, { screenshot: false });
    log(`  ${JSON.stringify(executed)}`);

    const server = await this.step('start code-server', () =>
      startCodeServer(this.tracker, {
        codeServer: config.codeServer,
        profile,
        folder: workspace,
        cwd: tempRoot,
        logFile: codeServerLog,
        timeoutMs: 60_000,
      }),
      { screenshot: false },
    );
    log(`  code-server ${server.url} (pid ${server.pid})`);

    const page = await this.step('launch chromium', async () => {
      const { chromium } = await loadPlaywright(config.toolsDir);
      const context = await chromium.launchPersistentContext(path.join(tempRoot, 'chromium'), {
        executablePath: config.chromium,
        headless: true,
        // This script ends the browser itself, in order, on signals too.
        handleSIGINT: false,
        handleSIGTERM: false,
        handleSIGHUP: false,
        env: this.tracker.env(profile.env),
        viewport: { width: 1400, height: 900 },
        args: [
          '--no-sandbox',
          '--disable-gpu',
          '--disable-quic',
          '--no-first-run',
          '--disable-background-networking',
          '--disable-component-update',
          '--disable-sync',
          '--disable-dev-shm-usage',
        ],
      });
      this.context = context;
      await context.addInitScript(installPageHelpers);
      const page = context.pages()[0] ?? (await context.newPage());
      this.page = page;
      const consoleLog = path.join(config.artifacts, 'browser-console.log');
      /** @type {string[]} */
      const consoleLines = [];
      page.on('console', (message) => {
        consoleLines.push(`[${message.type()}] ${message.text()}`);
      });
      page.on('pageerror', (error) => consoleLines.push(`[pageerror] ${error.message}`));
      this.flushConsole = () => writeFile(consoleLog, `${consoleLines.join('\n')}\n`);
      return page;
    }, { screenshot: false });

    await this.step(`open ${FILE}`, async () => {
      // The authority must be code-server's host, as in the workspace folder's URI: with none
      // (`vscode-remote:///tmp/…`) the editor holds another resource than the one the explorer
      // and the debugger open, and the debugger shows its stopped frame in a second tab.
      const payload = JSON.stringify([['openFile', `vscode-remote://${new URL(server.url).host}${file}`]]);
      const url = `${server.url}/?folder=${encodeURIComponent(workspace)}&payload=${encodeURIComponent(payload)}`;
      await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 60_000 });
      await waitForEditor(page, FILE, SQUARED_DIFF_LINE, 90_000);
    });

    await this.checkRunFile(page);
    await this.checkDebugFile(page);
    await this.checkRunWithoutDebugging(page);
    await this.checkShapesOnly(page);
    await this.checkNotebook(page);
  }

  /**
   * Copies a fixture notebook into the workspace and executes it with a real Jupyter kernel
   * (`run_notebook.py`: nbclient, `%load_ext shapelens`), which writes its trace there.
   * @param {string} workspace @param {string} notebook @param {NodeJS.ProcessEnv} env
   */
  async executeNotebook(workspace, notebook, env) {
    await cp(path.join(NOTEBOOK_FIXTURES, notebook), path.join(workspace, notebook));
    const logFile = path.join(this.config.artifacts, 'run-notebook.log');
    const code = await this.tracker.run(
      `run_notebook.py ${notebook}`,
      this.config.python,
      [path.join(NOTEBOOK_FIXTURES, 'run_notebook.py'), path.join(workspace, notebook)],
      { env, cwd: workspace, logFile, timeoutMs: 120_000 },
    );
    if (code !== 0) throw new Error(`run_notebook.py ${notebook} exited with ${code} (log: ${path.relative(repoRoot, logFile)})`);
  }

  /**
   * The notebook a real kernel ran with `%load_ext shapelens`, in VS Code's built-in notebook
   * editor (no Jupyter extension): each cell's lines carry their own shapes, read from the
   * kernel's trace; "Trace this Notebook's Kernel" without the Jupyter extension says what to
   * run by hand.
   * @param {import('playwright-core').Page} page
   */
  async checkNotebook(page) {
    const { config } = this;
    await this.step(`open ${NOTEBOOK} in the notebook editor`, async () => {
      // The debug steps left the panel open: hidden, the notebook shows all its cells at once.
      if (await page.locator('.part.panel').isVisible()) await runCommand(page, 'View: Hide Panel', 10_000);
      await page.keyboard.press('F1');
      await page.locator('.quick-input-widget input').waitFor({ state: 'visible', timeout: 10_000 });
      await page.keyboard.press('Backspace');
      await page.keyboard.type(NOTEBOOK);
      const row = page.locator('.quick-input-list .monaco-list-row', { hasText: NOTEBOOK }).first();
      await row.waitFor({ state: 'visible', timeout: 20_000 });
      await row.click();
      await page.locator(`.part.editor .tab[data-resource-name="${NOTEBOOK}"]`).first().waitFor({ state: 'visible', timeout: 30_000 });
      return waitForCells(page, (cells) => cells.some((cell) => lineOf(cell.lines, NOTEBOOK_X_LINE)), {
        timeout: 30_000,
        what: `a cell editor with \`${NOTEBOOK_X_LINE}\``,
      });
    });

    /** @param {import('./lib/workbench.mjs').NotebookCell[]} cells @param {string} code */
    const cellLine = (cells, code) => {
      const cell = cells.find((c) => lineOf(c.lines, code));
      return cell ? { cell: cells.indexOf(cell) + 1, line: /** @type {import('./lib/workbench.mjs').EditorLine} */ (lineOf(cell.lines, code)) } : undefined;
    };
    const seen = await this.step('see each cell\'s shapes on its own lines', () =>
      waitForCells(
        page,
        (cells) => {
          const x = cellLine(cells, NOTEBOOK_X_LINE);
          const imported = cellLine(cells, NOTEBOOK_IMPORT_LINE);
          const out = cellLine(cells, NOTEBOOK_OUT_LINE);
          const y = cellLine(cells, NOTEBOOK_Y_LINE);
          const row = cellLine(cells, NOTEBOOK_ROW_LINE);
          const loop = cellLine(cells, NOTEBOOK_LOOP_LINE);
          const xHint = x?.line.decorations.find((d) => d.includes('(4,3)'));
          const outHint = out?.line.decorations.find((d) => d.includes('(4,5)'));
          const yHint = y?.line.decorations.find((d) => d.includes('(4,5)'));
          const rowHint = row?.line.decorations.find((d) => d.includes('(5,)'));
          const loopHint = loop?.line.decorations.find((d) => d.includes('×3'));
          // On the right lines only: `import torch` (same cell as x) binds no tensor; x's hint
          // is not w's.
          const quiet = imported?.line.decorations.length === 0 && !xHint?.includes('(3,5)');
          return x && out && y && row && xHint && outHint && yHint && rowHint && loopHint && quiet && x.cell !== out.cell && out.cell !== y.cell
            ? { x: [x.cell, x.line.number, xHint], out: [out.cell, out.line.number, outHint], y: [y.cell, y.line.number, yHint], row: [row.cell, row.line.number, rowHint], loop: loopHint }
            : null;
        },
        {
          timeout: 60_000,
          what:
            `decorations "(4,3)" on \`${NOTEBOOK_X_LINE}\` (none on \`${NOTEBOOK_IMPORT_LINE}\`), "(4,5)" on \`${NOTEBOOK_OUT_LINE}\` ` +
            `and \`${NOTEBOOK_Y_LINE}\`, "(5,)" on \`${NOTEBOOK_ROW_LINE}\` and "×3" on \`${NOTEBOOK_LOOP_LINE}\`, in three cells`,
        },
      ),
    );
    log(`  ${JSON.stringify(seen)}`);

    const rerun = await this.step(`run ${RERUN_NOTEBOOK} in a second kernel while the notebook is open, and see the same cell's newer shapes`, async () => {
      const workspace = path.join(/** @type {string} */ (this.tempRoot), 'workspace');
      await this.executeNotebook(workspace, RERUN_NOTEBOOK, /** @type {import('./lib/code-server.mjs').Profile} */ (this.profile).env);
      return waitForCells(
        page,
        (cells) => {
          const y = cellLine(cells, NOTEBOOK_Y_LINE)?.line.decorations.find((d) => d.includes('(7,5)'));
          const x = cellLine(cells, NOTEBOOK_X_LINE)?.line.decorations.find((d) => d.includes('(4,3)'));
          return y && x ? { y, x } : null;
        },
        { timeout: 30_000, what: `"(7,5)" on \`${NOTEBOOK_Y_LINE}\` (the newer execution of the same text), "(4,3)" still on \`${NOTEBOOK_X_LINE}\`` },
      );
    });
    log(`  ${JSON.stringify(rerun)}`);

    const installed = (await readdir(/** @type {import('./lib/code-server.mjs').Profile} */ (this.profile).extensionsDir)).find((name) =>
      name.toLowerCase().startsWith('shapelens.shapelens-'),
    );
    const libs = path.join(/** @type {import('./lib/code-server.mjs').Profile} */ (this.profile).extensionsDir, String(installed), 'vscode-extension', 'bundled', 'libs');
    const message = await this.step(`run "${TRACE_KERNEL_TITLE}" without the Jupyter extension and see how to do it by hand`, async () => {
      // The notebook has the focus, as a user's would: the cursor in x's cell.
      await page.locator('.notebookOverlay .view-line', { hasText: NOTEBOOK_X_LINE }).first().click();
      await runCommand(page, TRACE_KERNEL_TITLE, 20_000);
      return waitForNotification(
        page,
        ['no Jupyter extension', `import sys; sys.path.append(${JSON.stringify(libs)})`, '%load_ext shapelens'],
        20_000,
      );
    });
    log(`  ${JSON.stringify(message)}`);

    // The notification's button puts those lines into the notebook; the other cells keep their
    // shapes (the server places the trace on cells by their text, not their index).
    const inserted = await this.step('click "Insert as First Cell" and see the lines in a new first cell, the shapes kept', async () => {
      const toast = page.locator('.notifications-toasts .notification-toast', { hasText: 'no Jupyter extension' }).first();
      await toast.hover(); // its buttons stay while the mouse is on it
      await toast.locator('.monaco-button', { hasText: 'Insert as First Cell' }).click();
      const [pathLine, loadLine] = [`import sys; sys.path.append(${JSON.stringify(libs)})`, '%load_ext shapelens'];
      return waitForCells(
        page,
        (cells) => {
          const first = cells[0]?.lines.map((line) => line.text.trim());
          const x = cellLine(cells, NOTEBOOK_X_LINE)?.line.decorations.find((d) => d.includes('(4,3)'));
          return first?.[0] === pathLine && first?.[1] === loadLine && x ? { first, x } : null;
        },
        { timeout: 20_000, what: `a first cell \`${pathLine}\` / \`${loadLine}\`, and "(4,3)" still on \`${NOTEBOOK_X_LINE}\`` },
      );
    });
    log(`  ${JSON.stringify(inserted)}`);
    await writeFile(path.join(config.artifacts, 'notebook-cells.txt'), `${formatCells(await page.evaluate(() => globalThis.__shapelensE2E.notebookCells()))}\n`);
  }

  /**
   * "ShapeLens: Run File (Shapes Only)" on a CUDA program: fake tensors on a simulated GPU, every
   * hint marked [fake], the status bar saying so.
   * @param {import('playwright-core').Page} page
   */
  async checkShapesOnly(page) {
    await this.step(`open ${SHAPES_FILE} with Quick Open`, () => quickOpen(page, SHAPES_FILE, SHAPES_LINE));
    await this.step(`run "${SHAPES_TITLE}" from the command palette`, async () => {
      await clickWord(page, SHAPES_LINE, 'pred');
      await runCommand(page, SHAPES_TITLE, 20_000);
    });
    const hint = await this.step('see the shape-only hint on the CUDA line', () =>
      waitForLines(
        page,
        (lines) => lineOf(lines, SHAPES_LINE)?.decorations.find((d) => d.includes('(4,1)') && d.includes('[fake]')) ?? null,
        { timeout: 90_000, what: `a decoration containing "(4,1)" and "[fake]" on \`${SHAPES_LINE}\`` },
      ),
    );
    log(`  ${JSON.stringify(hint)}`);
    const status = await this.step('see "shapes only" and the peak memory in the status bar', async () => {
      const item = page.locator('.statusbar-item', { hasText: 'shapes only' }).first();
      await item.waitFor({ state: 'visible', timeout: 20_000 });
      const text = await item.innerText();
      if (!/peak \d+(\.\d)? (B|KiB|MiB|GiB)/.test(text)) {
        throw new Error(`no peak memory in the status bar: ${JSON.stringify(text)}`);
      }
      return text;
    });
    log(`  status bar: ${JSON.stringify(status)}`);
  }

  /**
   * Ctrl+F5 on a `shapelens` launch configuration with args and env: the program runs traced,
   * without a debugger, and its hints show the shape those args and env made.
   * @param {import('playwright-core').Page} page
   */
  async checkRunWithoutDebugging(page) {
    await this.step(`open ${LAUNCHED_FILE} with Quick Open`, () => quickOpen(page, LAUNCHED_FILE, LAUNCHED_LINE));
    await this.step('run the launch configuration with Ctrl+F5', async () => {
      await clickWord(page, LAUNCHED_LINE, 'batch');
      await page.keyboard.press('Control+F5');
    });
    const hint = await this.step('see the hint of the shape the args and env made', () =>
      waitForLines(
        page,
        (lines) => lineOf(lines, LAUNCHED_LINE)?.decorations.find((d) => d.includes('batch (3,7)')) ?? null,
        { timeout: 90_000, what: `a decoration containing "batch (3,7)" on \`${LAUNCHED_LINE}\`` },
      ),
    );
    log(`  ${JSON.stringify(hint)}`);
    if (await page.locator('.debug-toolbar').isVisible()) {
      throw new Error('Ctrl+F5 started a debug session: the run should have no debugger');
    }
  }

  /**
   * "ShapeLens: Run File": the decoration, the Problems entry, the hover; both move with an edit.
   * @param {import('playwright-core').Page} page
   */
  async checkRunFile(page) {
    const { config } = this;
    await this.step(`run "${RUN_FILE_TITLE}" from the command palette`, async () => {
      await clickWord(page, PRED_LINE, 'pred'); // the editor has the focus, as a user's would
      const tries = await runCommand(page, RUN_FILE_TITLE, 60_000);
      if (tries > 1) log(`  the palette listed "${RUN_FILE_TITLE}" only on try ${tries}`);
    });

    const before = await this.step('see the (4,4) decoration on the squared_diff line', () =>
      waitForLines(
        page,
        (lines) => {
          const line = lines.find((l) => l.text.trim() === SQUARED_DIFF_LINE);
          const label = line?.decorations.find((d) => d.includes('(4,4)'));
          // Compact hints: the loop header says ×10 once, its body's lines no count, and a
          // line that binds no value says nothing.
          const loop = lineOf(lines, LOOP_LINE)?.decorations.find((d) => d.trim() === '×10');
          const quiet = lineOf(lines, ZERO_GRAD_LINE)?.decorations.length === 0;
          return line && label && loop && quiet && !label.includes('×') ? { number: line.number, label } : null;
        },
        {
          timeout: 150_000,
          what: `a decoration containing "(4,4)" (no count) on \`${SQUARED_DIFF_LINE}\`, "×10" on \`${LOOP_LINE}\`, none on \`${ZERO_GRAD_LINE}\``,
        },
      ),
    );
    log(`  line ${before.number}: ${JSON.stringify(before.label)}`);
    await writeFile(path.join(config.artifacts, 'editor-after-run.txt'), `${formatLines(await editorLines(page))}\n`);

    await this.checkModulesView(page);

    const problem = await this.step('see the broadcast warning in the Problems panel', async () => {
      await page.keyboard.press('Control+Shift+M');
      await page.locator('.markers-panel').first().waitFor({ state: 'visible', timeout: 20_000 });
      return waitForProblem(page, ['broadcast:', 'shapelens', `[Ln ${before.number},`], 20_000);
    });
    log(`  problem: ${JSON.stringify(problem)}`);

    const hover = await this.step('hover pred', () => hoverWord(page, PRED_LINE, 'pred', ['pred', '(4,1)'], 20_000));
    log(`  hover: ${JSON.stringify(hover.slice(0, 200))}`);

    const after = await this.step('insert a line above and see the decoration move down', async () => {
      await dismissHover(page, 10_000); // it covers the lines above `pred`
      await clickWord(page, INSERT_AFTER_LINE, 'torch');
      await page.keyboard.press('End');
      await page.keyboard.press('Enter');
      await page.keyboard.type(INSERTED_TEXT);
      const expected = before.number + 1;
      return waitForLines(
        page,
        (lines) => {
          if (!lines.some((l) => l.text.trim() === INSERTED_TEXT)) return null;
          const line = lines.find((l) => l.text.trim() === SQUARED_DIFF_LINE);
          const label = line?.decorations.find((d) => d.includes('(4,4)'));
          const elsewhere = lines.filter((l) => l !== line && l.decorations.some((d) => d.includes('squared_diff')));
          return line && line.number === expected && label && elsewhere.length === 0 ? { number: line.number, label } : null;
        },
        {
          timeout: 30_000,
          stableMs: 1500,
          what: `the "(4,4)" decoration on line ${expected} (moved down from ${before.number}) and on no other line`,
        },
      );
    });
    log(`  line ${after.number}: ${JSON.stringify(after.label)}`);
    const movedProblem = await this.step('see the broadcast warning move down in the Problems panel', () =>
      waitForProblem(page, ['broadcast:', 'shapelens', `[Ln ${after.number},`], 20_000),
    );
    log(`  problem: ${JSON.stringify(movedProblem)}`);
    await writeFile(path.join(config.artifacts, 'editor-after-edit.txt'), `${formatLines(await editorLines(page))}\n`);

    const commented = await this.step(`apply "${SHAPE_COMMENT_TITLE}" from Ctrl+. on \`${PRED_LINE}\``, async () => {
      await clickWord(page, PRED_LINE, 'pred');
      await page.keyboard.press('Control+.');
      // VS Code's code action menu lists refactorings (the server's kind) beside quick fixes
      const row = page.locator('.action-widget .monaco-list-row', { hasText: SHAPE_COMMENT_TITLE }).first();
      try {
        await row.waitFor({ state: 'visible', timeout: 20_000 });
      } catch (error) {
        const menu = await page.locator('.action-widget').allInnerTexts().catch(() => []);
        throw new Error(`Ctrl+. listed no "${SHAPE_COMMENT_TITLE}" (menu: ${JSON.stringify(menu)}): ${errorMessage(error)}`);
      }
      // The menu takes keys, not clicks (a pointer block covers it while it opens): move the
      // focus onto the action, then Enter, as a keyboard user does.
      for (let moves = 0; !(await row.evaluate((el) => el.classList.contains('focused'))); moves += 1) {
        if (moves > 10) throw new Error(`"${SHAPE_COMMENT_TITLE}" never got the focus in the menu`);
        await page.keyboard.press('ArrowDown');
      }
      await page.keyboard.press('Enter');
      return waitForLines(
        page,
        (lines) => lines.find((l) => l.text.trim().startsWith(PRED_LINE) && l.text.includes(SHAPE_COMMENT)),
        { timeout: 20_000, what: `\`${PRED_LINE}  ${SHAPE_COMMENT}\` in the editor` },
      );
    });
    log(`  line ${commented.number}: ${JSON.stringify(commented.text)}`);
  }

  /**
   * The Explorer's "ShapeLens" view after the run: the model `torch.nn.Linear(2, 1)` is a root
   * called 10 times on (4,2), giving (4,1); a click on it opens its declaration (else its class's
   * forward, in torch). Ends with the script's editor active again, for the steps after it.
   * @param {import('playwright-core').Page} page
   */
  async checkModulesView(page) {
    await this.step(`open the "${MODULES_VIEW}" view with "${FOCUS_MODULES_TITLE}"`, () =>
      runCommand(page, FOCUS_MODULES_TITLE, 20_000),
    );

    /** @param {import('./lib/workbench.mjs').TreeRow} row */
    const isModel = (row) => row.level === 1 && row.label === 'Linear';
    const model = await this.step('see the model in the ShapeLens view', () =>
      waitForTreeRows(
        page,
        MODULES_VIEW,
        (rows) => rows.find((row) => isModel(row) && row.description.includes('3 params') && row.description.includes('×10')),
        { timeout: 30_000, what: 'a top-level row "Linear" whose description has "3 params" and "×10"' },
      ),
    );
    log(`  ${JSON.stringify(model)}`);

    const leaves = await this.step('expand the model and see its in (4,2) and out (4,1) leaves', async () => {
      if (model.expanded === false) await treeRow(page, MODULES_VIEW, 'Linear').locator('.monaco-tl-twistie').click();
      return waitForTreeRows(
        page,
        MODULES_VIEW,
        (rows) => {
          const start = rows.findIndex(isModel);
          if (start < 0) return null;
          const end = rows.findIndex((row, index) => index > start && row.level <= 1);
          const children = rows.slice(start + 1, end < 0 ? undefined : end).filter((row) => row.level === 2);
          const input = children.find((row) => row.label === 'in' && row.description.includes('(4,2)'));
          const output = children.find((row) => row.label === 'out' && row.description.includes('(4,1)'));
          return input && output ? { input, output } : null;
        },
        { timeout: 10_000, what: 'the leaves "in (4,2)…" and "out (4,1)…" under "Linear"' },
      );
    });
    log(`  ${JSON.stringify(leaves)}`);

    const opened = await this.step('click the model and see where it was declared (or its forward) open', async () => {
      const declaration = lineOf(await editorLines(page), MODEL_LINE)?.number;
      const before = await activeTab(page);
      await treeRow(page, MODULES_VIEW, 'Linear').locator('.label-name').click();
      // The server may know the line `model = …` (the cursor goes there in this editor) or only
      // Linear.forward (torch's linear.py opens in a new tab).
      const deadline = Date.now() + 20_000;
      for (;;) {
        const now = await activeTab(page);
        if (now.tab && now.tab !== FILE) return now;
        if (now.tab === FILE && now.line === declaration && before.line !== declaration) return now;
        if (Date.now() > deadline) {
          throw new Error(
            `no editor moved: the active tab is ${JSON.stringify(now)} (before the click ${JSON.stringify(before)}; ` +
              `\`${MODEL_LINE}\` is line ${declaration})`,
          );
        }
        await page.waitForTimeout(150); // poll interval
      }
    });
    log(`  ${JSON.stringify(opened)}`);

    if (opened.tab !== FILE) {
      // Closed, not left behind: the debugging steps later expect the script's editor alone.
      await this.step(`close ${opened.tab} and go back to ${FILE}`, async () => {
        const tab = page.locator(`.part.editor .tab[data-resource-name="${opened.tab}"]`);
        await tab.locator('.tab-actions .action-label').first().click();
        await tab.waitFor({ state: 'detached', timeout: 10_000 });
        await waitForEditor(page, FILE, SQUARED_DIFF_LINE, 20_000);
        const now = await activeTab(page);
        if (now.tab !== FILE) throw new Error(`the active tab is ${now.tab}, not ${FILE}`);
      });
    }
  }

  /**
   * "ShapeLens: Debug File" with a breakpoint in the loop: the debugger stops there, the lines run
   * so far carry their hints while paused, and the tensor locals have inline values.
   * @param {import('playwright-core').Page} page
   */
  async checkDebugFile(page) {
    const { config } = this;
    const toolbar = page.locator('.debug-toolbar');

    await this.step('revert the file and clear the results', async () => {
      await runCommand(page, REVERT_TITLE, 20_000);
      await runCommand(page, CLEAR_TITLE, 20_000);
      return waitForLines(
        page,
        (lines) =>
          lineOf(lines, LOSS_BACKWARD_LINE) &&
          !lines.some((l) => l.text.trim() === INSERTED_TEXT) &&
          lines.every((l) => l.decorations.length === 0),
        { timeout: 20_000, stableMs: 1000, what: 'the file as on disk, with no decoration on any line' },
      );
    });

    const breakpoint = await this.step(`set a breakpoint on \`${LOSS_BACKWARD_LINE}\` with F9`, async () => {
      await clickWord(page, LOSS_BACKWARD_LINE, 'backward');
      await page.keyboard.press('F9');
      return waitForLines(
        page,
        (lines) => {
          const line = lineOf(lines, LOSS_BACKWARD_LINE);
          return line?.debugMarks.some((mark) => mark.startsWith('codicon-debug-breakpoint')) ? line : null;
        },
        { timeout: 10_000, what: `a breakpoint in the glyph margin of \`${LOSS_BACKWARD_LINE}\`` },
      );
    });
    log(`  line ${breakpoint.number}: ${JSON.stringify(breakpoint.debugMarks)}`);

    await this.step(`run "${DEBUG_FILE_TITLE}" from the command palette`, async () => {
      const tries = await runCommand(page, DEBUG_FILE_TITLE, 60_000);
      if (tries > 1) log(`  the palette listed "${DEBUG_FILE_TITLE}" only on try ${tries}`);
    });

    const stopped = await this.step(`see the debugger stop at \`${LOSS_BACKWARD_LINE}\``, async () => {
      const line = await waitForLines(
        page,
        (lines) => {
          const highlighted = lines.filter((l) => l.debugMarks.includes('debug-top-stack-frame-line'));
          return highlighted.length === 1 && highlighted[0].text.trim() === LOSS_BACKWARD_LINE ? highlighted[0] : null;
        },
        { timeout: 120_000, what: `the stopped-line highlight on \`${LOSS_BACKWARD_LINE}\` (and on no other line)` },
      );
      await toolbar.waitFor({ state: 'visible', timeout: 10_000 });
      // The stopped frame is shown in the editor the user had open, not in a second one.
      const tabs = await page.locator(`.part.editor .tab[data-resource-name="${FILE}"]`).count();
      if (tabs !== 1) throw new Error(`${tabs} editor tabs show ${FILE} (the debugger opened the stopped frame in another)`);
      return line;
    });
    log(`  line ${stopped.number}: ${JSON.stringify(stopped.debugMarks)}`);

    const live = await this.step('see the hints of the lines run so far while paused', () =>
      waitForLines(
        page,
        (lines) => {
          // Paused in the first pass of the loop: not the finished run's ×10 on its header.
          const pred = lineOf(lines, PRED_LINE)?.decorations.find((d) => d.includes('pred (4,1)'));
          const finished = lineOf(lines, LOOP_LINE)?.decorations.some((d) => d.includes('×10'));
          const squared = lineOf(lines, SQUARED_DIFF_LINE)?.decorations.find((d) => d.includes('(4,4)'));
          const paused = lineOf(lines, LOSS_BACKWARD_LINE)?.debugMarks.includes('debug-top-stack-frame-line');
          return pred && squared && paused && !finished ? { pred, squared } : null;
        },
        {
          timeout: 30_000,
          what: `decorations with "pred (4,1)" on \`${PRED_LINE}\` and "(4,4)" on \`${SQUARED_DIFF_LINE}\`, no ×10 on \`${LOOP_LINE}\` yet, still paused`,
        },
      ),
    );
    log(`  ${JSON.stringify(live)}`);

    // One text per line: the live hint owns pred's line; the debugger adds no second value there.
    const single = await this.step('see one text on the line of pred while paused', () =>
      waitForLines(
        page,
        (lines) => {
          const line = lineOf(lines, PRED_LINE);
          const texts = [...(line?.decorations ?? []), ...(line?.inlineValues ?? [])].filter((t) => t.includes('(4,1)'));
          return texts.length === 1 ? texts[0] : null;
        },
        { timeout: 10_000, what: `exactly one text with "(4,1)" on \`${PRED_LINE}\` (the hint or the inline value)` },
      ),
    );
    log(`  ${JSON.stringify(single)}`);

    const variables = await this.step('see the tensors by shape in the Variables view', async () => {
      const deadline = Date.now() + 30_000;
      let rows = await variableRows(page);
      while (Date.now() < deadline) {
        const tensors = rows.filter((row) => row.value.startsWith('Tensor ('));
        if (tensors.length > 0) {
          const data = rows.filter((row) => /tensor\(|\[\[/.test(row.value));
          if (data.length > 0) throw new Error(`data shown in the Variables view: ${JSON.stringify(data)}`);
          return tensors;
        }
        await page.waitForTimeout(250); // the view fills after the stop event
        rows = await variableRows(page);
      }
      throw new Error(`no tensor row in the Variables view: ${JSON.stringify(rows)}`);
    });
    log(`  ${JSON.stringify(variables)}`);
    const shapes = variables.map((row) => `${row.name} ${row.value}`);
    if (!shapes.some((text) => /^(x Tensor \(4,2\) f32 cpu|pred Tensor \(4,1\) f32 cpu grad|y Tensor \(4,\) f32 cpu)$/.test(text))) {
      throw new Error(`no x, y or pred row with its shape: ${JSON.stringify(shapes)}`);
    }
    // The wait for the debuggee's end below means something only if we see it running now.
    const debuggee = await this.step('see the debugged script running while paused', async () => {
      const running = await this.tracker.markedProcessesRunning(TRACED_CHILD);
      if (running.length === 0) throw new Error(`no process with ${TRACED_CHILD} in its command line while paused`);
      return running;
    }, { screenshot: false });
    log(`  ${debuggee.length} traced child process(es): ${debuggee.join(', ')}`);
    await writeFile(path.join(config.artifacts, 'editor-while-paused.txt'), `${formatLines(await editorLines(page))}\n`);

    // The session attaches to debugpy, so Shift+F5 is the toolbar's "Disconnect".
    await this.step('stop debugging with Shift+F5', async () => {
      await page.keyboard.press('Shift+F5');
      await toolbar.waitFor({ state: 'hidden', timeout: 20_000 });
      return waitForLines(
        page,
        (lines) => lines.every((l) => !l.debugMarks.includes('debug-top-stack-frame-line') && l.inlineValues.length === 0),
        { timeout: 20_000, what: 'no stopped-line highlight and no inline value' },
      );
    });
    await writeFile(path.join(config.artifacts, 'editor-after-debug.txt'), `${formatLines(await editorLines(page))}\n`);

    // Disconnect lets the script run on (debugpy gets `terminateDebuggee: false`); this one is short.
    const debuggeeSeconds = await this.step('see the debugged script end', () => this.waitForNoProcess(TRACED_CHILD, 30_000), {
      screenshot: false,
    });
    log(`  no ${TRACED_CHILD} process ${debuggeeSeconds.toFixed(1)} s after the debugger stopped`);
  }

  /**
   * Polls until no process of this run has `needle` in its command line; returns the seconds waited.
   * @param {string} needle
   * @param {number} timeout
   */
  async waitForNoProcess(needle, timeout) {
    const since = Date.now();
    for (;;) {
      const running = await this.tracker.markedProcessesRunning(needle);
      if (running.length === 0) return (Date.now() - since) / 1000;
      if (Date.now() - since > timeout) {
        throw new Error(`still running after ${timeout / 1000} s: ${running.join(', ')}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 200)); // poll interval
    }
  }

  /**
   * Ends everything this run started, keeps the logs, removes the temporary folder.
   * Every caller (the end of the run, a signal) waits for the same clean-up.
   */
  cleanup() {
    this.cleanedUp ??= this.cleanupOnce();
    return this.cleanedUp;
  }

  async cleanupOnce() {
    await this.flushConsole?.().catch(() => {});
    if (this.context) {
      await Promise.race([this.context.close().catch(() => {}), new Promise((resolve) => setTimeout(resolve, 10_000))]);
    }
    const survivors = await this.tracker.endAll({ log: (line) => log(line) });
    if (survivors.length > 0) {
      log(`WARNING: processes still alive after SIGKILL: ${survivors.join(', ')}`);
    }
    if (this.userDataDir) {
      await cp(path.join(this.userDataDir, 'logs'), path.join(this.config.artifacts, 'vscode-logs'), { recursive: true }).catch(() => {});
    }
    if (this.tempRoot) {
      if (this.config.keepTemp) log(`kept ${this.tempRoot}`);
      else await rm(this.tempRoot, { recursive: true, force: true }).catch(() => {});
    }
  }

  /** @param {string | undefined} failure */
  async writeResult(failure) {
    const result = { ok: !failure, failure, seconds: (Date.now() - started) / 1000, steps: this.steps };
    await writeFile(path.join(this.config.artifacts, 'result.json'), `${JSON.stringify(result, null, 2)}\n`).catch(() => {});
  }
}

/**
 * Open a workspace file with Quick Open and wait for `line` in its editor. F1 opens the palette
 * in command mode (`>`); without the `>` it finds files (Ctrl+P would be the browser's Print).
 * @param {import('playwright-core').Page} page
 * @param {string} file
 * @param {string} line
 */
async function quickOpen(page, file, line) {
  await page.keyboard.press('F1');
  await page.locator('.quick-input-widget input').waitFor({ state: 'visible', timeout: 10_000 });
  await page.keyboard.press('Backspace');
  await page.keyboard.type(file);
  const row = page.locator('.quick-input-list .monaco-list-row', { hasText: file }).first();
  await row.waitFor({ state: 'visible', timeout: 20_000 }); // file search results come after the recent files
  await row.click();
  await waitForEditor(page, file, line, 30_000);
}

/**
 * playwright-core from scripts/install-chromium.sh's folder, else from the repository's node_modules.
 * @param {string} toolsDir
 * @returns {Promise<typeof import('playwright-core')>}
 */
async function loadPlaywright(toolsDir) {
  let resolved;
  try {
    resolved = createRequire(path.join(toolsDir, 'package.json')).resolve('playwright-core');
  } catch {
    try {
      resolved = createRequire(path.join(repoRoot, 'package.json')).resolve('playwright-core');
    } catch {
      throw new Error(`playwright-core is not installed in ${toolsDir} (run scripts/install-chromium.sh)`);
    }
  }
  const module = await import(pathToFileURL(resolved).href);
  return module.default ?? module;
}

async function mainWithCleanup() {
  /** @type {Run | undefined} */
  let run;
  /** @type {string | undefined} */
  let failure;
  /** @param {NodeJS.Signals} signal */
  const onSignal = (signal) => {
    log(`${signal}: stopping`);
    void (async () => {
      await run?.cleanup();
      await run?.writeResult(`stopped by ${signal}`);
      process.exit(signal === 'SIGINT' ? 130 : 143);
    })();
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    const config = loadConfig(process.env);
    run = new Run(config);
    const current = run;
    /** @type {NodeJS.Timeout | undefined} */
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`the whole end-to-end run took longer than ${config.timeoutMs / 1000} s (SHAPELENS_E2E_TIMEOUT_S)`)),
        config.timeoutMs,
      );
    });
    try {
      await Promise.race([current.main(), timeout]);
    } finally {
      clearTimeout(timer);
    }
  } catch (error) {
    failure = errorMessage(error);
    if (run) await run.screenshot('failure');
  }
  if (run) {
    await run.cleanup();
    await run.writeResult(failure);
  }
  if (failure) {
    console.error(`\nE2E FAILED after ${elapsed()}: ${failure}`);
    if (run) console.error(`artifacts (screenshots, logs): ${path.relative(process.cwd(), run.config.artifacts) || '.'}`);
    process.exitCode = 1;
  } else {
    console.log(`\nE2E PASSED in ${elapsed()}; screenshots in ${path.relative(process.cwd(), run?.config.artifacts ?? '')}`);
  }
  // Exit now even if a call into the closed browser is still pending after a timeout.
  process.exit();
}

await mainWithCleanup();
