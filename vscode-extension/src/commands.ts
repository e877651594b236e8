// The extension's commands: run (with a cancellable progress notification), clear, restart,
// the diagnostics report.
import * as path from "path";
import * as vscode from "vscode";
import { ShapeLensClient } from "./client";
import { DecorationController } from "./decorations";
import { diagnosticsText, doctorArgument, DOCTOR_COMMAND } from "./diagnostics";
import { configurationFor, LaunchRun, RUNNABLE_TYPES } from "./launchConfig";
import { launchConfigurations, moduleFile, readLaunch } from "./launches";
import { CELL_SCHEME } from "./notebook";
import { Settings } from "./settings";
import { RunStatusBar, RunSummary } from "./statusBar";

export interface CommandDeps {
  client: ShapeLensClient;
  decorations: DecorationController;
  status: RunStatusBar;
  output: vscode.LogOutputChannel;
  settings: () => Settings;
}

export function registerCommands(deps: CommandDeps): vscode.Disposable[] {
  return [
    vscode.commands.registerCommand("shapelens.runFile", (uri?: vscode.Uri) => runFile(deps, uri)),
    // Shapes only: the program on fake tensors (any model size, CUDA simulated without a GPU).
    vscode.commands.registerCommand("shapelens.runFileShapesOnly", (uri?: vscode.Uri) =>
      run(deps, uri, { fake: true, label: `${path.basename((uri ?? vscode.window.activeTextEditor?.document.uri)?.fsPath ?? "")} · shapes only` }),
    ),
    vscode.commands.registerCommand("shapelens.runFunctionAt", (uri: vscode.Uri, fn: string) => run(deps, uri, { fn })),
    // A launch configuration's run (Ctrl+F5 on a `shapelens` one comes here from debug.ts).
    vscode.commands.registerCommand("shapelens.runLaunch", (launch: LaunchRun, name?: string) =>
      runLaunch(deps, launch, name),
    ),
    vscode.commands.registerCommand("shapelens.runLaunchConfiguration", () => pickLaunchConfiguration(deps)),
    vscode.commands.registerCommand("shapelens.runFileDistributed", async (uri?: vscode.Uri) => {
      const answer = await vscode.window.showInputBox({
        title: "ShapeLens: Run File on N Processes",
        prompt: "Processes per node (torchrun --nproc-per-node); every rank is traced",
        value: "2",
        validateInput: (text) => (/^[1-9][0-9]*$/.test(text.trim()) ? undefined : "a whole number, at least 1"),
      });
      return answer === undefined ? undefined : run(deps, uri, { nprocPerNode: Number(answer.trim()) });
    }),
    vscode.commands.registerCommand("shapelens.openTrace", async () => {
      // A trace written elsewhere (`--json`, SHAPELENS_TRACE, `shapelens merge`): nothing runs.
      const [file] =
        (await vscode.window.showOpenDialog({
          title: "ShapeLens: Open Trace",
          filters: { "ShapeLens trace": ["json"] },
          canSelectMany: false,
        })) ?? [];
      if (file) {
        const summary = (await deps.client.executeCommand("shapelens.loadTrace", { path: file.fsPath })) as RunSummary;
        deps.status.finished(path.basename(file.fsPath), summary);
      }
    }),
    vscode.commands.registerCommand("shapelens.cancelRun", () => deps.client.executeCommand("shapelens.cancel", {})),
    vscode.commands.registerCommand("shapelens.clearResults", async () => {
      deps.decorations.clear();
      await deps.client.executeCommand("shapelens.clear", {});
      deps.status.idle();
    }),
    vscode.commands.registerCommand("shapelens.restartServer", async () => {
      await deps.client.restart();
      deps.output.info("ShapeLens language server restarted");
    }),
    vscode.commands.registerCommand("shapelens.showOutput", () => deps.output.show(true)),
    vscode.commands.registerCommand("shapelens.showDiagnosticsReport", () => showDiagnosticsReport(deps)),
  ];
}

/** `shapelens doctor` through the language server, in an untitled document to paste from. */
async function showDiagnosticsReport(deps: CommandDeps): Promise<void> {
  const settings = deps.settings();
  const reply = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: "ShapeLens: asking the interpreter…" },
    () => deps.client.executeCommand(DOCTOR_COMMAND, doctorArgument(settings)).catch((err: unknown) => err),
  );
  const content = diagnosticsText(reply, settings, `${vscode.env.appName} ${vscode.version}`);
  const document = await vscode.workspace.openTextDocument({ language: "plaintext", content });
  await vscode.window.showTextDocument(document);
}

interface RunOptions {
  fn?: string;
  nprocPerNode?: number;
  collectiveTimeout?: number;
  args?: string[];
  cwd?: string;
  env?: Record<string, string>;
  module?: string;
  label?: string; // how the run is named in the status bar and notifications
  fake?: boolean; // a shape-only run on fake tensors
}

/** Run File: with the arguments of the launch configuration written for this file, if any. */
async function runFile(deps: CommandDeps, uri?: vscode.Uri): Promise<RunSummary | undefined> {
  const target = uri ?? vscode.window.activeTextEditor?.document.uri;
  if (!target || target.scheme !== "file") {
    return run(deps, target);
  }
  const folder = vscode.workspace.getWorkspaceFolder(target);
  const configs = launchConfigurations(folder, target);
  const config = configurationFor(configs, target.fsPath, (a, b) => path.resolve(a) === path.resolve(b));
  if (!config) {
    return run(deps, target);
  }
  const launch = await readLaunch(config, folder);
  if (!launch) {
    return undefined;
  }
  deps.output.info(`${path.basename(target.fsPath)}: with the arguments of launch configuration "${String(config.name)}"`);
  return run(deps, target, { ...runOptions(launch), label: `${path.basename(target.fsPath)} · ${String(config.name)}` });
}

function runOptions(launch: LaunchRun): RunOptions {
  return {
    args: launch.args,
    cwd: launch.cwd,
    env: launch.env,
    module: launch.module,
    nprocPerNode: launch.nprocPerNode,
    collectiveTimeout: launch.collectiveTimeout,
  };
}

/** The file a launch run's results belong to: its program, or the module's file. */
async function ownerOf(launch: LaunchRun): Promise<vscode.Uri | undefined> {
  if (launch.program) {
    return vscode.Uri.file(launch.program);
  }
  return (await moduleFile(launch.module ?? "", launch.cwd)) ?? vscode.window.activeTextEditor?.document.uri;
}

async function runLaunch(deps: CommandDeps, launch: LaunchRun, name?: string): Promise<RunSummary | undefined> {
  const owner = await ownerOf(launch);
  const label = name ?? (launch.module ? `-m ${launch.module}` : path.basename(launch.program ?? ""));
  return run(deps, owner, { ...runOptions(launch), label });
}

/** "ShapeLens: Run Launch Configuration…": any `shapelens`, `debugpy` or `python` launch configuration. */
async function pickLaunchConfiguration(deps: CommandDeps): Promise<RunSummary | undefined> {
  const folder =
    (vscode.window.activeTextEditor && vscode.workspace.getWorkspaceFolder(vscode.window.activeTextEditor.document.uri)) ??
    vscode.workspace.workspaceFolders?.[0];
  const configs = launchConfigurations(folder, vscode.window.activeTextEditor?.document.uri).filter(
    (c) => RUNNABLE_TYPES.has(String(c.type)) && c.request === "launch",
  );
  if (configs.length === 0) {
    void vscode.window.showInformationMessage("ShapeLens: launch.json has no Python launch configuration to run.");
    return undefined;
  }
  const picked = await vscode.window.showQuickPick(
    configs.map((config) => ({
      label: String(config.name ?? "(unnamed)"),
      description: String(config.program ?? (config.module ? `-m ${String(config.module)}` : "")),
      config,
    })),
    { title: "ShapeLens: Run Launch Configuration" },
  );
  if (!picked) {
    return undefined;
  }
  const launch = await readLaunch(picked.config, folder);
  return launch ? runLaunch(deps, launch, picked.label) : undefined;
}

async function run(deps: CommandDeps, uri?: vscode.Uri, options: RunOptions = {}): Promise<RunSummary | undefined> {
  const { fn, nprocPerNode } = options;
  if (!vscode.workspace.isTrusted) {
    void vscode.window.showWarningMessage("ShapeLens runs your code, so it only works in a trusted workspace.");
    return undefined;
  }
  const target = uri ?? vscode.window.activeTextEditor?.document.uri;
  if (target?.scheme === CELL_SCHEME) {
    void vscode.window.showWarningMessage(
      "ShapeLens: a notebook's cells are traced in its kernel: run \"ShapeLens: Trace this Notebook's Kernel\", then the cells.",
    );
    return undefined;
  }
  if (!target || target.scheme !== "file") {
    void vscode.window.showWarningMessage("ShapeLens: open a Python file on disk to run it.");
    return undefined;
  }
  const document = await vscode.workspace.openTextDocument(target);
  if (document.isDirty) {
    await document.save(); // the run reads the file from disk, as Run Python File does
  }
  const name =
    (options.label ?? path.basename(target.fsPath)) +
    (fn ? ` · ${fn}` : "") +
    (nprocPerNode ? ` · ${nprocPerNode} processes` : "");
  deps.status.running(name);
  try {
    const summary = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `ShapeLens: running ${name}`, cancellable: true },
      async (_progress, token) => {
        const cancel = token.onCancellationRequested(() => {
          void deps.client.executeCommand("shapelens.cancel", { uri: target.toString() });
        });
        try {
          return (await deps.client.executeCommand("shapelens.run", {
            uri: target.toString(),
            function: fn,
            args: options.args ?? deps.settings().extraArgs,
            ...(options.cwd ? { cwd: options.cwd } : {}),
            ...(options.env ? { env: options.env } : {}),
            ...(options.module ? { module: options.module } : {}),
            progress: false, // this notification is the progress UI
            ...(nprocPerNode ? { nprocPerNode } : {}),
            ...(nprocPerNode && options.collectiveTimeout ? { collectiveTimeout: options.collectiveTimeout } : {}),
            ...(options.fake ? { fake: true } : {}),
          })) as RunSummary;
        } finally {
          cancel.dispose();
        }
      },
    );
    deps.status.finished(name, summary);
    deps.output.info(`${name}: ${JSON.stringify(summary)}`);
    return summary;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    deps.status.finished(name, { status: "error", message });
    void vscode.window.showErrorMessage(`ShapeLens: ${message}`);
    return undefined;
  }
}
