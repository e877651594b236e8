// The status-bar item: running / last run time / findings count.
import * as vscode from "vscode";

export interface RunSummary {
  status: string;
  exitCode?: number;
  lines?: number;
  findings?: number;
  durationS?: number;
  message?: string;
  shapeOnly?: boolean;
}

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
    const findings = summary.findings ?? 0;
    const time = summary.durationS !== undefined ? ` ${summary.durationS.toFixed(1)}s` : "";
    // A shape-only run that stopped at a value it could not know went as far as shapes go.
    const fine = summary.status === "ok" || summary.status === "shape_only_stop";
    const icon = fine ? (findings ? "$(warning)" : "$(check)") : "$(error)";
    const shapes = summary.shapeOnly ? " · shapes only" : "";
    this.item.text = `${icon} ShapeLens:${time} · ${findings} finding${findings === 1 ? "" : "s"}${shapes}`;
    this.item.tooltip = `${file}: ${summary.status}${summary.message ? ` (${summary.message})` : ""}`;
  }

  dispose(): void {
    this.item.dispose();
  }
}
