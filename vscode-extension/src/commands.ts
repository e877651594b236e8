// The extension's commands: run (with a cancellable progress notification), clear, restart.
import * as path from "path";
import * as vscode from "vscode";
import { ShapeLensClient } from "./client";
import { DecorationController } from "./decorations";
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
    vscode.commands.registerCommand("shapelens.runFile", (uri?: vscode.Uri) => run(deps, uri)),
    vscode.commands.registerCommand("shapelens.runFunctionAt", (uri: vscode.Uri, fn: string) => run(deps, uri, fn)),
    vscode.commands.registerCommand("shapelens.runFileDistributed", async (uri?: vscode.Uri) => {
      const answer = await vscode.window.showInputBox({
        title: "ShapeLens: Run File on N Processes",
        prompt: "Processes per node (torchrun --nproc-per-node); every rank is traced",
        value: "2",
        validateInput: (text) => (/^[1-9][0-9]*$/.test(text.trim()) ? undefined : "a whole number, at least 1"),
      });
      return answer === undefined ? undefined : run(deps, uri, undefined, Number(answer.trim()));
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
  ];
}

async function run(
  deps: CommandDeps,
  uri?: vscode.Uri,
  fn?: string,
  nprocPerNode?: number,
): Promise<RunSummary | undefined> {
  if (!vscode.workspace.isTrusted) {
    void vscode.window.showWarningMessage("ShapeLens runs your code, so it only works in a trusted workspace.");
    return undefined;
  }
  const target = uri ?? vscode.window.activeTextEditor?.document.uri;
  if (!target || target.scheme !== "file") {
    void vscode.window.showWarningMessage("ShapeLens: open a Python file on disk to run it.");
    return undefined;
  }
  const document = await vscode.workspace.openTextDocument(target);
  if (document.isDirty) {
    await document.save(); // the run reads the file from disk, as Run Python File does
  }
  const name =
    path.basename(target.fsPath) + (fn ? ` · ${fn}` : "") + (nprocPerNode ? ` · ${nprocPerNode} processes` : "");
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
            args: deps.settings().extraArgs,
            progress: false, // this notification is the progress UI
            ...(nprocPerNode ? { nprocPerNode } : {}),
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
