// The status-bar item: running / last run time / findings count.
import * as vscode from "vscode";
import { finishedText, RunSummary } from "./statusText";

export type { RunSummary };

export class RunStatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem("shapelens.status", vscode.StatusBarAlignment.Left, 50);

  constructor() {
    this.item.name = "ShapeLens";
    this.item.command = "shapelens.showOutput";
    this.idle();
  }

  idle(): void {
    this.item.text = "$(telescope) ShapeLens";
    this.item.tooltip = "ShapeLens: run a Python file to see its tensors";
    this.item.show();
  }

  running(file: string): void {
    this.item.text = `$(sync~spin) ShapeLens: ${file}`;
    this.item.tooltip = `Running ${file} under the tracer`;
  }

  finished(file: string, summary: RunSummary): void {
    const { text, tooltip } = finishedText(file, summary);
    this.item.text = text;
    this.item.tooltip = tooltip;
  }

  dispose(): void {
    this.item.dispose();
  }
}
