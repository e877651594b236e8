// "ShapeLens: Trace this Notebook's Kernel": loads the IPython extension into the notebook's
// running kernel through the Jupyter extension's API, or says how to do it by hand. Runs code in
// the kernel only on this explicit command.
import * as vscode from "vscode";
import {
  collectKernelOutputs,
  KernelOutputItem,
  kernelSetupCode,
  manualLines,
  manualMessage,
  readKernelOutcome,
} from "./notebook";

export const TRACE_KERNEL_COMMAND = "shapelens.traceNotebookKernel";
const JUPYTER_EXTENSION = "ms-toolsai.jupyter";

// The part of the Jupyter extension's API used here (microsoft/vscode-jupyter src/api.d.ts).
interface JupyterKernel {
  readonly status: string;
  readonly language: string;
  executeCode(code: string, token: vscode.CancellationToken): AsyncIterable<{ items: KernelOutputItem[] }>;
}
interface JupyterApi {
  kernels?: { getKernel(uri: vscode.Uri): Thenable<JupyterKernel | undefined> };
}

const COPY = "Copy Lines";
const INSERT = "Insert as First Cell";

export function registerNotebookCommands(bundledLibs: string, output: vscode.LogOutputChannel): vscode.Disposable[] {
  return [
    vscode.commands.registerCommand(TRACE_KERNEL_COMMAND, (uri?: vscode.Uri) => traceKernel(bundledLibs, output, uri)),
  ];
}

async function traceKernel(bundledLibs: string, output: vscode.LogOutputChannel, uri?: vscode.Uri): Promise<boolean> {
  const notebook = notebookFor(uri);
  if (!notebook) {
    void vscode.window.showWarningMessage("ShapeLens: open a Jupyter notebook to trace its kernel.");
    return false;
  }
  if (!vscode.workspace.isTrusted) {
    void vscode.window.showWarningMessage("ShapeLens runs code in the notebook's kernel, so it only works in a trusted workspace.");
    return false;
  }
  const extension = vscode.extensions.getExtension<JupyterApi>(JUPYTER_EXTENSION);
  if (!extension) {
    return manual(bundledLibs, output, notebook, "no Jupyter extension (ms-toolsai.jupyter) to reach the kernel.");
  }
  let kernel: JupyterKernel | undefined;
  try {
    const api = extension.isActive ? extension.exports : await extension.activate();
    kernel = await (api ?? extension.exports)?.kernels?.getKernel(notebook.uri);
  } catch (error) {
    output.warn(`Jupyter extension API: ${describe(error)}`);
    return manual(bundledLibs, output, notebook, `the Jupyter extension gave no kernel (${describe(error)}).`);
  }
  if (!kernel || kernel.status === "dead") {
    return manual(bundledLibs, output, notebook, "this notebook has no running kernel yet (run a cell, then this command again).");
  }
  if (kernel.language && kernel.language.toLowerCase() !== "python") {
    void vscode.window.showWarningMessage(`ShapeLens traces Python kernels; this notebook's kernel runs ${kernel.language}.`);
    return false;
  }
  const running = kernel;
  return vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: "ShapeLens: loading into the notebook's kernel", cancellable: true },
    async (_progress, token) => {
      const { stdout, errors } = await collectKernelOutputs(running.executeCode(kernelSetupCode(bundledLibs), token), (text) =>
        output.warn(`kernel: ${text}`),
      );
      if (token.isCancellationRequested) {
        return false;
      }
      const outcome = readKernelOutcome(stdout, errors);
      if (outcome.ok) {
        output.info(`${notebook.uri.toString()}: ${JSON.stringify(outcome.report)}`);
        void vscode.window.showInformationMessage(outcome.message);
        return true;
      }
      output.error(`${notebook.uri.toString()}: ${outcome.message}`);
      void vscode.window.showErrorMessage(`ShapeLens: ${outcome.message}`);
      return false;
    },
  );
}

/** No kernel to reach: say what to run in a cell (and offer to copy it or insert it as a cell). */
async function manual(bundledLibs: string, output: vscode.LogOutputChannel, notebook: vscode.NotebookDocument, why: string): Promise<false> {
  const lines = manualLines(bundledLibs);
  output.info(`trace a notebook's kernel by hand: run in a cell:\n${lines.join("\n")}`);
  const choice = await vscode.window.showInformationMessage(manualMessage(bundledLibs, why), COPY, INSERT);
  if (choice === COPY) {
    await vscode.env.clipboard.writeText(`${lines.join("\n")}\n`);
  } else if (choice === INSERT) {
    const edit = new vscode.WorkspaceEdit();
    const cell = new vscode.NotebookCellData(vscode.NotebookCellKind.Code, lines.join("\n"), "python");
    edit.set(notebook.uri, [vscode.NotebookEdit.insertCells(0, [cell])]);
    await vscode.workspace.applyEdit(edit);
  }
  return false;
}

function notebookFor(uri: vscode.Uri | undefined): vscode.NotebookDocument | undefined {
  if (uri) {
    const key = uri.toString();
    const found = vscode.workspace.notebookDocuments.find((doc) => doc.uri.toString() === key);
    if (found) {
      return found;
    }
  }
  return vscode.window.activeNotebookEditor?.notebook;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
