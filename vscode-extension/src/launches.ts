// Launch configurations read the VS Code way (launch.json, envFile, module files) for the
// commands that run them and for the `shapelens` debug type.
import * as path from "path";
import * as vscode from "vscode";
import { LaunchRun, launchRun, substitute } from "./launchConfig";

/** The workspace's launch configurations, with launch.json's variables substituted. */
export function launchConfigurations(folder: vscode.WorkspaceFolder | undefined, file?: vscode.Uri): Record<string, unknown>[] {
  const configs = vscode.workspace.getConfiguration("launch", folder).get<unknown[]>("configurations") ?? [];
  const vars: Record<string, string> = {};
  if (folder) {
    vars.workspaceFolder = folder.uri.fsPath;
    vars.workspaceFolderBasename = path.basename(folder.uri.fsPath);
  }
  if (file) {
    vars.file = file.fsPath;
    vars.fileDirname = path.dirname(file.fsPath);
  }
  return (substitute(configs, vars, process.env) as unknown[]).filter(
    (c): c is Record<string, unknown> => !!c && typeof c === "object",
  );
}

/** A configuration as a run: its envFile read, its relative paths resolved; problems shown. */
export async function readLaunch(
  config: Record<string, unknown>,
  folder: vscode.WorkspaceFolder | undefined,
): Promise<LaunchRun | undefined> {
  const base = folder?.uri.fsPath ?? process.cwd();
  let envFileText: string | undefined;
  if (typeof config.envFile === "string" && config.envFile) {
    const file = path.resolve(base, config.envFile);
    try {
      envFileText = new TextDecoder().decode(await vscode.workspace.fs.readFile(vscode.Uri.file(file)));
    } catch {
      void vscode.window.showWarningMessage(`ShapeLens: envFile ${file} cannot be read; running without it.`);
    }
  }
  const { run: launch, problem } = launchRun(config, envFileText, process.env);
  if (!launch) {
    void vscode.window.showErrorMessage(`ShapeLens: launch configuration "${String(config.name)}": ${problem}`);
    return undefined;
  }
  const cwd = launch.cwd ? path.resolve(base, launch.cwd) : folder?.uri.fsPath;
  const program = launch.program ? path.resolve(cwd ?? base, launch.program) : undefined;
  return { ...launch, ...(cwd ? { cwd } : {}), ...(program ? { program } : {}) };
}

/** The file of a module run from `cwd` (`pkg/train.py` or `pkg/train/__main__.py`). */
export async function moduleFile(module: string, cwd: string | undefined): Promise<vscode.Uri | undefined> {
  const root = cwd ?? vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  if (!root || !module) {
    return undefined;
  }
  const parts = module.split(".");
  for (const candidate of [path.join(root, ...parts) + ".py", path.join(root, ...parts, "__main__.py")]) {
    try {
      await vscode.workspace.fs.stat(vscode.Uri.file(candidate));
      return vscode.Uri.file(candidate);
    } catch {
      // not this one
    }
  }
  return undefined;
}
